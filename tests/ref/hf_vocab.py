"""hf_vocab.py — BertTokenizerFast from a vocab.txt, built the same way
under transformers 4.x and 5.x, and checked.

transformers 5.x ignores BertTokenizerFast(vocab_file=PATH): it silently
builds a tokenizer holding only the 5 special tokens, and every comparison
against it compares with garbage. The path passed positionally works in both
majors. bert_tokenizer_fast() does that and then checks that the loaded
vocabulary has as many tokens as the file has lines, so a silently wrong
tokenizer stops the test instead of passing it.
"""


def vocab_lines(path):
    """The tokens of a vocab.txt: one per line (a final newline ends the last one)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return len(lines)


def check_vocab_size(tok, path):
    """Raise SystemExit unless tok holds the vocabulary of the file at path."""
    want = vocab_lines(path)
    got = tok.vocab_size
    if got != want:
        raise SystemExit(
            f"FAIL: BertTokenizerFast loaded {got} tokens from {path}, which has {want} lines "
            "(transformers 5.x ignores vocab_file=...: pass the path positionally)")


def bert_tokenizer_fast(path, **kwargs):
    """BertTokenizerFast(path, **kwargs), its vocabulary size checked."""
    from transformers import BertTokenizerFast
    tok = BertTokenizerFast(path, **kwargs)
    check_vocab_size(tok, path)
    return tok
