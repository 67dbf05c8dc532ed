"""A sweep's trial's metric, as the executor sees it (standard library only, like it: see
main.py): the lines of the trial's stdout naming the metric (``name=``), sent to the AM,
which parses them (``submarine_py.metrics``)."""
import time

if __package__:  # shipped, main.py's _sibling gives every module ``protocol`` before it runs
    from . import protocol

#: How often a sweep's trial's new stdout is read for lines naming its metric (seconds).
METRIC_SCAN_SECONDS = 0.25
#: At most this much of a trial's new stdout is read per scan (what is skipped has no say).
METRIC_SCAN_BYTES = 1 << 20


class TrialMetric:
    """The metric ``name`` of one trial, whose stdout is the file ``path`` from ``offset`` on
    (where the trial began)."""

    def __init__(self, name, path, offset):
        self.name = name
        self.path = path
        self.offset = offset  # how far the stdout was read
        self.next_scan = 0.0  # time.monotonic() of the next scan

    def lines(self, final=False):
        """The lines naming the metric written since the last call (whole lines only, until
        ``final``)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(METRIC_SCAN_BYTES)
        except OSError:
            return []
        end = len(data) if final else data.rfind(b"\n") + 1
        self.offset += end
        needle = (self.name + "=").encode()
        return [line.decode("utf-8", "replace").strip() for line in data[:end].splitlines() if needle in line]

    def send(self, am, executor_id, attempt, log):
        """Every METRIC_SCAN_SECONDS while the trial runs: its new lines naming the metric, to
        the AM (``am``: am_client's AMClient). Lines the AM did not take are read again: the
        next scan, or the trial's exit (``lines(final=True)``), sends them."""
        now = time.monotonic()
        if now < self.next_scan:
            return
        self.next_scan = now + METRIC_SCAN_SECONDS
        start = self.offset
        lines = self.lines()
        if lines:
            try:
                am.call("POST", protocol.PATH_METRIC, {"executor": executor_id, "attempt": attempt, "lines": lines},
                        timeout=5, retry_for=2)
            except Exception as exc:
                self.offset = start
                log("could not send the trial's metric to the AM: %s" % exc)
