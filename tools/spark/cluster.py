# A real Spark standalone cluster on this machine, from pyspark's own bin/spark-class (no Spark download): one
# master and N workers on 127.0.0.1, each its own JVM in its own process group, started with an environment
# that does not carry the repo on PYTHONPATH (executors get the code the driver ships: tools.spark.pipeline
# zips it). Also what the driver's REST API and the workers say about who ran tasks.
#     with Cluster(2, workdir) as c: ... spark_session(master=c.url) ...
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request


def spark_home():
    import pyspark
    return os.path.dirname(pyspark.__file__)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url, timeout=60.0):
    # Generous: a JVM busy with a batch (or 2 cores shared with a test suite) answers its UI late, and a
    # report that gives up early would fail a run whose data path was fine.
    with urllib.request.urlopen(url, timeout=timeout) as r:  # loopback only: the cluster's own web UIs
        return json.load(r)


class Cluster:
    def __init__(self, workers, workdir, cores=1, memory="1g", python=None):
        self.n, self.dir, self.cores, self.memory = workers, workdir, cores, memory
        self.port, self.ui_port = free_port(), free_port()
        self.worker_ui = [free_port() for _ in range(workers)]
        self.url = "spark://127.0.0.1:%d" % self.port
        self.python = python
        self.procs = []

    def _env(self):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
        env.update(SPARK_HOME=spark_home(), SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY="256m",
                   SPARK_LOG_DIR=os.path.join(self.dir, "logs"), SPARK_WORKER_DIR=os.path.join(self.dir, "work"))
        # The master and workers only keep the cluster's books (registrations, heartbeats, executor launches):
        # HotSpot's optimising compiler costs them seconds of CPU at start-up that they never get back, and on
        # two cores that CPU is taken from the driver and executors starting beside them. The quick compiler
        # alone, unless the caller's environment says otherwise. (Executors and the driver are not affected.)
        env.setdefault("SPARK_DAEMON_JAVA_OPTS", "-XX:TieredStopAtLevel=1")
        if self.python:
            env["PYSPARK_PYTHON"] = self.python
        return env

    def _spawn(self, name, args):
        log = open(os.path.join(self.dir, name + ".log"), "w")
        p = subprocess.Popen([os.path.join(spark_home(), "bin", "spark-class")] + args, cwd=self.dir, env=self._env(),
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        return p

    def start(self, timeout=120.0, wait=True):
        """The master first, the workers once it is ALIVE: a worker that registers with a master still electing
        itself gets no answer and tries again only 5-15 s later (Spark's fixed, randomised retry), which was
        most of this cluster's start-up. wait=False returns as the workers start (a driver may start meanwhile:
        the master gives it executors as the workers register); wait_workers() then waits for them."""
        os.makedirs(os.path.join(self.dir, "work"), exist_ok=True)
        self._timeout, self._deadline = timeout, time.monotonic() + timeout
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                               str(self.port), "--webui-port", str(self.ui_port)])
        self._wait(lambda: self.master_state().get("status") == "ALIVE", "the master was not ALIVE")
        for i in range(self.n):
            self._spawn("worker-%d" % (i + 1), ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                                "--cores", str(self.cores), "--memory", self.memory, "--webui-port",
                                                str(self.worker_ui[i]), "--work-dir", os.path.join(self.dir, "work"),
                                                self.url])
        return self.wait_workers() if wait else self

    def wait_workers(self):
        """Returns once every worker has registered with the master (ALIVE in its state)."""
        self._wait(lambda: len(self.alive_workers()) >= self.n,
                   lambda: "%d of %d workers registered" % (len(self.alive_workers()), self.n))
        return self

    def _wait(self, ready, what):
        while not ready():
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError("a cluster daemon exited (code %s); logs in %s" % (p.returncode, self.dir))
            if time.monotonic() > self._deadline:
                raise TimeoutError("%s within %.0f s; logs in %s"
                                   % (what() if callable(what) else what, self._timeout, self.dir))
            time.sleep(0.1)

    def master_state(self):
        # {} while the master cannot say: not listening yet, or (ValueError) an HTML page where its JSON belongs,
        # as its UI answered once right after it started (its log: ALIVE by then)
        try:
            return get_json("http://127.0.0.1:%d/json/" % self.ui_port)
        except (OSError, ValueError):
            return {}

    def alive_workers(self):
        return [w for w in self.master_state().get("workers", []) if w.get("state") == "ALIVE"]

    def executors_by_worker(self, app_id):
        """{worker id: [executor ids of app_id it ran, live or finished]}, from each worker's own web UI."""
        out = {}
        for port in self.worker_ui:
            try:
                w = get_json("http://127.0.0.1:%d/json/" % port)
            except OSError:
                continue
            ids = [e["id"] for e in w.get("executors", []) + w.get("finishedexecutors", [])
                   if e.get("appid") == app_id]
            out[w.get("id", str(port))] = sorted(ids)
        return out

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs = []
        shutil.rmtree(os.path.join(self.dir, "work"), ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def executors_with_tasks(spark):
    """{executor id: tasks run} for the executors (never the driver) of this session's application that ran
    tasks, from the driver's REST API (spark.ui.enabled must be on)."""
    sc = spark.sparkContext
    url = "%s/api/v1/applications/%s/allexecutors" % (sc.uiWebUrl.rstrip("/"), sc.applicationId)
    return {e["id"]: e["totalTasks"] for e in get_json(url) if e["id"] != "driver" and e.get("totalTasks", 0) > 0}
