"""The cyclic garbage collector's settings for a long-running command.

CPython's defaults (a young-generation collection every 700 net allocations of container
objects) suit short scripts. A service that decodes a pod per watch event allocates dicts and
lists by the thousand per pod, almost all freed by reference counting at once; the collector
still runs every 700 allocations, and as the informer's cache grows, CPython's rule (a full
collection whenever the long-lived objects grew by a quarter) walks the whole cache again and
again: at 5,000 pods, three full collections of 0.15 to 0.25 s each, pauses of the event loop.
Almost nothing here is cyclic garbage (about 1,800 objects per 1,000 pods, since the deploy
retry stopped making ~45 per pod: ``placement.retry``).

Two settings, as large Python services use them (gc.freeze is in the standard library for this):

* ``gc.freeze()`` once start-up is done: the tens of thousands of objects imported modules
  created (functions, classes, constants) move to a permanent generation that no collection
  walks again.
* The young threshold raised from 700 to ``YOUNG_THRESHOLD``: collections 14 times rarer, each
  walking what survived since the last; older generations keep the standard ratios (10 and
  10), so full collections are at least a million allocations apart, and still only when the
  long-lived objects grew by a quarter (CPython's own rule). Garbage in cycles waits longer
  (bounded by the threshold: a few MiB at most); anything freed by reference counting, nearly
  everything here, is freed at once as before.

Measured (the collector's own CPU while pods came and went, start-up excluded; bench/README.md,
"the collector"): 5,000 pods up and down 0.8 to 0.9 s → 0.19 to 0.23 s, 1,000 pods 0.04 → 0.02 s;
RSS all Running and peak unchanged (175 / 176 MiB at 5,000).
"""

from __future__ import annotations

import gc

#: net allocations of container objects between two young collections (CPython: 700)
YOUNG_THRESHOLD = 10_000


def settle_after_start_up() -> None:
    """Freeze what start-up created and space out the young collections (see the module)."""
    gc.collect()  # start-up's own cycles (module import leftovers) are freed, not frozen
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
