"""What a failed attempt's stderr says: its last lines and, first, the error in it.

Standard library only, shipped beside the executor (``subm_stderr.py``, see ``main.py``). The
executor sends :func:`stderr_tail`'s text with a failed attempt's exit code; the AM finds the
error again in it (``am/diagnostics.py``), so a tensor dump printed after a traceback cannot
hide the exception that ended the task.
"""
import os
import stat

#: A failed attempt's stderr, as sent with its exit code (the AM quotes it in diagnostics): its
#: last lines (at most TAIL_LINES, TAIL_BYTES), after the error found in its last
#: ERROR_SEARCH_BYTES where that lies before them (see :func:`stderr_tail`).
TAIL_LINES = 20
TAIL_BYTES = 2048
ERROR_SEARCH_BYTES = 65536


def stderr_path(fd=2):
    """The file this process's stderr (or ``fd``) writes to, or None (a pipe or a terminal: in a
    local Docker container the backend reads the tail itself)."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        path = os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        return None
    return path if os.path.isfile(path) else None


def stderr_tail(path, start):
    """What a failed attempt's report quotes (:func:`stderr_report`) of what it wrote to
    ``path`` since offset ``start``, of which it reads the last ERROR_SEARCH_BYTES; None:
    unreadable."""
    read = _read_end(path, start, ERROR_SEARCH_BYTES)
    if read is None:
        return None
    text, cut = read
    return stderr_report(text.split("\n", 1)[-1] if cut else text)  # its first line was cut


def stderr_report(text):
    """What a failed attempt's report quotes of the end of its stderr (``text``, at most
    ERROR_SEARCH_BYTES): its last lines (at most TAIL_LINES, TAIL_BYTES); and first, where it
    lies before them, the error :func:`find_error` finds in ``text`` (a tensor dump printed
    after a traceback pushes it out of the last lines), then SKIPPED. The AM finds the error
    again in what this gives (``am/diagnostics.py``)."""
    lines = text.splitlines()
    first, size = len(lines), 0
    while first > 0 and len(lines) - first < TAIL_LINES:
        size += len(lines[first - 1].encode("utf-8", "replace")) + 1
        if size > TAIL_BYTES and first < len(lines):
            break
        first -= 1
    tail = "\n".join(lines[first:])[-TAIL_BYTES:]
    at, error = find_error(lines)
    return "\n".join(error + [SKIPPED, tail]) if error and at < first else tail


#: Between the error and the last lines in what :func:`stderr_tail` sends, where they are apart.
SKIPPED = "[subm: what stderr holds between the error and its last lines is left out]"
TRACEBACK = "Traceback (most recent call last):"
#: What begins a traceback's exception line (``ValueError: ...``, ``torch.OutOfMemoryError``).
EXCEPTION = r"[A-Za-z_][\w.]*(:|$)"
#: What makes a line name an error, where no traceback is found (see :func:`find_error`) ...
#: (``\b`` first: a search tries each position, and without it ``\w*`` ran to the end of a long
#: word from every one of them, quadratic in the line: a 100 000-digit line took a minute.)
ERROR_WORDS = (r"\b\w*(?:Error|Exception)\b|\b(?:error|ERROR|fatal|Fatal|FATAL|failed|Failed|FAILED|CRITICAL|Killed"
               r"|Aborted|Segmentation fault|core dumped|command not found|No such file or directory"
               r"|Permission denied|Connection refused|terminate called)\b")
#: ... unless it only informs or warns (glog's I and W lines, as TensorFlow and gRPC write them;
#: logging's levels; Python's warnings): "round-off errors" in an INFO line is no error.
NOT_ERRORS = r"^\[?[IWD]\d{4}|^\[[IW] |\b(?:INFO|DEBUG|WARN|WARNING|Warning)\b|\b\w+Warning\b"
#: At most this many lines of an exception's message, and characters of any line quoted.
MESSAGE_LINES, LINE_CHARS = 4, 500


def find_error(lines):
    """``(index, error_lines)``: what says what went wrong among a stream's ``lines``, from
    its line ``index``; ``(len(lines), [])`` if nothing does. The last Python traceback's
    exception (its line, and the indented lines after it, MESSAGE_LINES in all), after the
    traceback's header and its last frame (``File "...", line N, in f`` and its source line;
    "  ..." stands for the frames before); without a complete traceback, the last line that
    names an error (ERROR_WORDS, not NOT_ERRORS)."""
    import re

    def cut(line):
        return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " ..."

    heads = [i for i, line in enumerate(lines) if line.strip().endswith(TRACEBACK)]
    if heads:
        head = heads[-1]
        margin = _indent(lines[head])  # a traceback quoted indented: its lines are indented past it
        frame, frames, i = [], 0, head + 1
        while i < len(lines) and lines[i][margin:margin + 1] in (" ", "\t"):
            text = lines[i].strip()
            if text.startswith('File "') or text == "...":  # "...": frames an excerpt left out
                frame, frames = [lines[i]] if text != "..." else [], frames + 1
            elif len(frame) == 1 and text.strip("^~ ") and _indent(lines[i]) > _indent(frame[0]):
                frame.append(lines[i])  # its source line (not the ^^^ under it)
            i += 1
        if i < len(lines) and not lines[i][:margin].strip() and re.match(EXCEPTION, lines[i][margin:]):
            message = [lines[i]]
            for line in lines[i + 1:i + MESSAGE_LINES]:
                if not line.strip() or line[margin:margin + 1] not in (" ", "\t"):
                    break
                message.append(line)
            before = [" " * margin + "  ..."] if frames > 1 else []
            return head, [cut(line) for line in [lines[head]] + before + frame + message]
    words, not_errors = re.compile(ERROR_WORDS), re.compile(NOT_ERRORS)
    for i in range(len(lines) - 1, -1, -1):
        if words.search(lines[i]) and not not_errors.search(lines[i]):
            return i, [cut(lines[i].strip())]
    return len(lines), []


def _indent(line):
    return len(line) - len(line.lstrip())


def last_lines(path, start):
    """The last lines (at most TAIL_LINES, TAIL_BYTES) written to ``path`` since offset ``start``
    (a hung task's last words, stdout's or stderr's); None: unreadable."""
    read = _read_end(path, start, TAIL_BYTES)
    if read is None:
        return None
    text, cut = read
    lines = text.splitlines()
    if cut and lines:
        lines = lines[1:]  # the first line was cut
    return "\n".join(lines[-TAIL_LINES:])


def _read_end(path, start, limit):
    """``(text, cut)``: what was written to ``path`` since offset ``start``, at most its last
    ``limit`` bytes, and whether that cut into its first line; None: unreadable."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            begin = max(start, end - limit)
            f.seek(begin)
            data = f.read(end - begin)
    except (OSError, ValueError):
        return None
    return data.decode("utf-8", "replace"), begin > start


def last_printed(since):
    """When (epoch seconds) stdout or stderr was last written, ``since`` at the earliest; None
    when neither is a file (a pipe's time does not move on every kernel, a terminal's lags)."""
    known = False
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            since, known = max(since, st.st_mtime), True
    return since if known else None
