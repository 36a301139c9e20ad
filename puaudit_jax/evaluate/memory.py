"""Peak resident memory of the process while a block runs (the protocol's memory column).

Sampled every 2 ms from /proc (``peak_mb``) with its increase over the RSS just before (``delta_mb``).
"""

from __future__ import annotations

import resource
import threading


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() / 2**20
    except OSError:  # not Linux: the process peak so far
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PeakMemory:
    """Context manager sampling the process RSS in a thread; ``peak_mb``, ``delta_mb`` after exit."""

    def __init__(self, interval: float = 0.002):
        self.interval, self.peak_mb, self.start_mb = interval, 0.0, 0.0
        self._stop = threading.Event()

    def _run(self):
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, _rss_mb())
            self._stop.wait(self.interval)

    def __enter__(self):
        self.start_mb = self.peak_mb = _rss_mb()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, _rss_mb())

    @property
    def delta_mb(self) -> float:
        """Peak minus starting resident memory, in MB."""
        return self.peak_mb - self.start_mb
