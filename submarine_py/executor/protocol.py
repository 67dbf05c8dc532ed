"""The AM-executor protocol's names: the environment variables that carry it and the HTTP paths
of the AM's endpoint (``am/server.py``), spelled once for both sides.

It imports nothing, so it stays within the executor's rule (standard library only, see
``main.py``): it is shipped beside the executor like its other modules (``subm_protocol.py``,
or embedded in its bundle), and the AM, the plan and the backends import it from here. A
variable's constant is its name without ``SUBM_`` (``AM_URL`` is ``"SUBM_AM_URL"``), a path's
is ``PATH_`` and its last part (``PATH_REGISTER`` is ``"/v1/register"``).

Settings of the ``subm`` command or of the AM alone (``SUBM_HOME``, ``SUBM_RM_URL``,
``SUBM_GPU_IDLE_SECONDS``...) and test hooks (``SUBM_TEST_*``) are not part of it and stay with
what reads them.
"""

# -- an executor's environment: set by the backend that launches it, the AM's executor_env and
# -- the plan's executor_settings; read by the executor (main.py, am_client.py, workdir.py,
# -- envcache.py)
TOKEN = "SUBM_TOKEN"  #: the job's secret, which every call to the AM carries (Bearer)
TOKEN_FILE = "SUBM_TOKEN_FILE"  #: a file holding TOKEN instead (YARN: variables reach a log)
AM_URL = "SUBM_AM_URL"  #: the AM's address, where the launcher knows it
AM_DISCOVERY = "SUBM_AM_DISCOVERY"  #: else URLs, comma-separated, one per RM (``{app}``: the application), whose PATH_AM says it
CA_BUNDLE = "SUBM_CA_BUNDLE"  #: a PEM file of the CAs that ``https://`` calls trust (the cluster's, where TLS is on)
AM_DISCOVERY_SECONDS = "SUBM_AM_DISCOVERY_SECONDS"  #: how long to look for the AM there (600)
AM_LOST_SECONDS = "SUBM_AM_LOST_SECONDS"  #: an AM that answers no call this long is gone (60)
EXECUTOR_ID = "SUBM_EXECUTOR_ID"  #: the executor's id (else skein's SKEIN_CONTAINER_ID)
ROLE = "SUBM_ROLE"  #: the task's role (the executor's, and each task process's)
INDEX = "SUBM_INDEX"  #: the task's index (the executor's preferred one, and each process's)
JOB_ID = "SUBM_JOB_ID"  #: the job's id (the executor's, and each task process's)
STOP_GRACE = "SUBM_STOP_GRACE"  #: SIGTERM -> SIGKILL, seconds: timeouts.stop_grace_seconds
ADVERTISE_HOST = "SUBM_ADVERTISE_HOST"  #: the host the executor registers (else NM_HOST, its FQDN)
WORKDIR = "SUBM_WORKDIR"  #: the task's working directory (else the executor's)
LOG_TO_CONTAINER = "SUBM_LOG_TO_CONTAINER"  #: "1": write stdout/stderr to the container's log dir
FILES_ARCHIVE = "SUBM_FILES_ARCHIVE"  #: the job's files, one archive to unpack in the workdir
FILES_LINKS = "SUBM_FILES_LINKS"  #: the job's files: localized name -> destination (encode_links)
ENV_ARCHIVE = "SUBM_ENV_ARCHIVE"  #: environment.archive, unpacked into the node's cache
ENV_SHA256 = "SUBM_ENV_SHA256"  #: its digest, the cache's key where given
ENV_CACHE = "SUBM_ENV_CACHE"  #: the node's folder of unpacked environments
ENV_CACHE_DAYS = "SUBM_ENV_CACHE_DAYS"  #: how long an unused one is kept (7)
PYTHON_WRAPPER = "SUBM_PYTHON_WRAPPER"  #: "1": put ``python``/``python3`` wrappers on the task's PATH

# -- each task process's environment: built by the AM (plan.process_envs; a sweep's trial_env),
# -- sent in a ``run`` instruction, passed on by the executor; user-facing (docs/jobfile.md)
JOB_NAME = "SUBM_JOB_NAME"  #: the job's name
FRAMEWORK = "SUBM_FRAMEWORK"  #: the job's framework
ATTEMPT = "SUBM_ATTEMPT"  #: the attempt, from 0
HOST = "SUBM_HOST"  #: the task's host
PORT = "SUBM_PORT"  #: the port the task may listen on
NUM_TASKS = "SUBM_NUM_TASKS"  #: the tasks of the job
CLUSTER_SPEC = "SUBM_CLUSTER_SPEC"  #: JSON {role: ["host:port", ...]}
LOCAL_RANK = "SUBM_LOCAL_RANK"  #: the process's rank within its task
LOCAL_WORLD_SIZE = "SUBM_LOCAL_WORLD_SIZE"  #: the task's processes
SHARED_DIR = "SUBM_SHARED_DIR"  #: the job's shared folder (the executor checks it is one)
TENSORBOARD_DIR = "SUBM_TENSORBOARD_DIR"  #: the folder TensorBoard reads
ENVIRONMENT = "SUBM_ENVIRONMENT"  #: where environment.archive was unpacked (set by the executor)
TRIAL = "SUBM_TRIAL"  #: a sweep's trial's number
PARAM_PREFIX = "SUBM_PARAM_"  #: + a parameter's name in upper case: its value in a trial

# -- the AM's HTTP endpoint (am/server.py): what executors call, with the job's token ...
PATH_REGISTER = "/v1/register"  #: POST: where an executor listens; the reply names its task
PATH_NEXT = "/v1/next"  #: GET: long poll for instructions (the executor's heartbeat)
PATH_STARTED = "/v1/started"  #: POST: the task's processes started
PATH_EXIT = "/v1/exit"  #: POST: the task ended (its exit code, stderr's tail, metric lines)
PATH_METRIC = "/v1/metric"  #: POST: a sweep's trial's lines naming its metric
PATH_GPU = "/v1/gpu"  #: POST: NVML samples of the task's GPUs
PATH_GOODBYE = "/v1/goodbye"  #: POST: the executor leaves, as told
PATH_KILL = "/v1/kill"  #: POST: kill the job (the local backend's ``subm kill``)
# -- ... and what is open to read (also through the RM's proxy, hence matched by their end)
PATH_AM = "/v1/am"  #: GET: the AM's address (AM_DISCOVERY)
PATH_STATUS = "/v1/status"  #: GET: the job's report, as JSON
PATH_LINE = "/v1/line"  #: GET: (YARN) another AM asks the line's steward its verdict (``backends/yarn/protocol.py``)


def encode_links(links):
    """``{destination: localized name}`` as SUBM_FILES_LINKS carries it: ``name:destination``
    pairs joined by ``|``. YARN writes a variable into its launch script between double
    quotes, unescaped, so JSON's quotes were lost there; destinations never hold ``:`` or ``|``
    (the job file's rules) and names are ``.subm-url-N``."""
    return "|".join("%s:%s" % (name, dest) for dest, name in sorted(links.items()))


def decode_links(text):
    """The inverse of :func:`encode_links` (an empty text: no links)."""
    out = {}
    for pair in (text or "").split("|"):
        if pair:
            name, _, dest = pair.partition(":")
            out[dest] = name
    return out
