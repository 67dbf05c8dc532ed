"""The words a subm application on YARN, its AM and its clients share, spelled once: how its
AMs find each other (its tag, its gang's tag, the progress that tells where its gang stands),
what the job file says of its gang, where the AM leaves its report, and a test's hook passed to
the AM. Imported by the submitting side (``client/``), the AM's (``am/``) and what both share
(``capacity.py``, ``attempts.py``); it imports nothing.

The protocol between AMs (gang admission, ``admission.py``), all of it:

1. At submission each job says its gang in a tag (:data:`GANG_TAG`, ``capacity.gang_tag``) and
   carries :data:`TAG`; YARN keeps tags for the application's life, and every AM reads them.
2. Its AM says where its gang stands in the application's progress (:data:`PROGRESS`: queued,
   asked, held; the RM shows it to every AM as a percentage, read with :data:`QUEUED_BELOW`
   and :data:`ASKED_BELOW`). A job ACCEPTED (no AM yet) or at 0 waits.
3. From those two every AM can order the line (``admission.line``) and weigh the room.
4. The oldest application whose AM is up (RUNNING; oldest by id) is the line's steward
   (``am/steward.py``): a waiting AM finds that AM's address (``status_url``) in the report it
   leaves in its log folder (:data:`REPORT_FILE`, served by its NodeManager), and asks
   ``GET <status_url>`` ``PATH_LINE`` (``executor/protocol.py``, where every path of the AM's endpoint is) ``?app=<its id>&spread=0|1``. The answer (JSON):
   ``{"steward": its id, "read_at": epoch seconds of its round or null, "verdict": null or
   {"fits", "why", "placement", "never", "ahead", "told_by"}}`` (``steward.to_wire``). null:
   not read yet, or the app is not in its round: the asking AM decides alone that poll, as it
   does where no steward answers. The path is open and read-only, as the status page.
"""
from __future__ import annotations

from ...states import GateState

#: The YARN application tag every subm job carries (how its AMs find each other's gangs).
TAG = "submarine"
#: The tag that says a job's gang (``capacity.gang_tag``: ``subm-gang:2x2048m1c1g+...``).
GANG_TAG = "subm-gang:"
#: An AM's progress (skein's ``set_progress``; the RM shows it as a percentage) for each state
#: of its gang. A job not yet started by YARN (ACCEPTED) or whose AM has not said (0) waits.
PROGRESS = {GateState.QUEUED: 0.01, GateState.ASKED: 0.25, GateState.HELD: 0.5}
#: The RM's percentages below which a job waits, and below which it is still asking.
QUEUED_BELOW, ASKED_BELOW = 10.0, 40.0
#: The job file's word (``subm_job.json``) that its gang was asked for with the application.
GANG_ASKED_AT_SUBMISSION = "gang_asked_at_submission"
#: The AM's report, in its container's log directory: rewritten while it runs (what an AM of a
#: later YARN attempt goes on from), final once the job is done; ``subm status`` and ``subm
#: logs`` read it through the NodeManager.
REPORT_FILE = "subm-report.json"
#: A file of a container's log folder while its launch unpacks the travelling environment's
#: layers (what, how much: ``client/travel/farm.py``): the NodeManager lists it, and the AM's gang
#: clock waits for that container as for YARN's localizing.
UNPACKING_LOG = "subm-unpacking.txt"
#: A test's hook (tests/test_a_gang_asked_at_submission_leaves_nothing_held_on_yarn.py): the AM
#: waits this many seconds before taking the first container asked for with the application,
#: so that executors register between admission and launch, the race of issue 32, on purpose.
#: Passed from the submitting environment to the AM's (``app_spec.master``); unset: no wait.
LAUNCH_PAUSE_ENV = "SUBM_TEST_LAUNCH_PAUSE"
