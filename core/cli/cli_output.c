/* cli_output.c — the output files the verbs are given (predict --output,
 * report --svg / -o, squad-eval --out): "-" is stdout; a path is written with
 * tf_file_write_atomic, which writes through a device or FIFO and never
 * replaces a link or another non-regular file; and an output that is one of
 * the verb's inputs is refused before anything is read or written. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "tfcore/file.h"

tf_status tf_cli_write_output(const char *path, const char *text, size_t len, tf_error *err)
{
    if (strcmp(path, "-") != 0) {
        tf_file_part part = {text, len};
        return tf_file_write_atomic(path, &part, 1, err);
    }
    if ((len && fwrite(text, 1, len, stdout) != len) || fflush(stdout) != 0 || ferror(stdout))
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot write to stdout: %s", strerror(errno));
    return TF_OK;
}

tf_status tf_cli_check_not_input(const char *what, const char *output, const char *const *inputs, size_t n,
                                 tf_error *err)
{
    struct stat o, in;
    if (strcmp(output, "-") == 0 || stat(output, &o) != 0) return TF_OK; /* stdout, or a new file */
    if (!S_ISREG(o.st_mode)) return TF_OK;                                /* /dev/null and the like */
    for (size_t i = 0; i < n; i++) {
        if (!inputs[i] || stat(inputs[i], &in) != 0) continue;
        if (in.st_dev == o.st_dev && in.st_ino == o.st_ino)
            return tf_error_set(err, TF_ERR_USAGE, "%s %s is the input %s itself; refusing to overwrite an input",
                                what, output, inputs[i]);
    }
    return TF_OK;
}
