"""tally: the pass/fail count every reference test (tests/ref/*.py) keeps.

    import tally
    from tally import check
    tally.show_at_most = 30   # optional: stop printing FAIL lines after 30
    check(ok, what)           # counts ok; prints "FAIL: what" when not; returns ok
    ... tally.passed, tally.failed (the test prints its own summary line)

Imported from the test's own folder (Python puts a script's folder first on
sys.path).
"""
passed = 0
failed = 0
show_at_most = None  # None: print every failure


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        if show_at_most is None or failed <= show_at_most:
            print("FAIL:", what)
    return ok
