#!/usr/bin/env python3
"""Issue 19's two GPU studies at a size one device call finishes: the MQAR sweep over mixers x model
width (configs/sweeps/mqar-mixers-width.toml) and the reduced-scale recall study
(configs/sweeps/recall-study-reduced.toml), each within a wall-time budget. Python 3 standard
library only. scripts/recall-study.sh is the entry point; docs/studies.md ("The recall
studies on one GPU") says how to call it and what it writes.

  scripts/recall-study.sh mqar|recall --linea BIN --out DIR [--budget S] [--jobs J] [--steps N] ...
  scripts/recall-study.sh report DIR          # rebuild DIR's tables and plot from its runs/
  scripts/recall-study.sh best DIR... --out D # MQAR studies at several lrs: the best lr per point

How a study runs (`run`):
  0. One study at a time: it holds an exclusive flock on /tmp/linea-recall-study.lock (LOCK_FILE) from
     its start to its last file, and a second study fails at once, naming the file and the holder. The
     probe's step times hold only while the GPU runs this study's processes alone; the first GPU attempt
     (run r1, 2026-12-07) ran both studies side by side, 8 + 8 processes, and real steps came out 2-2.5x
     slower than probed (recall gdn2-3to1: probed 221 ms, 508 ms in training), so that 19 of 33 MQAR
     runs and 11 of 21 recall runs, the Transformer among them, never started. One study per call.
     With --device cuda and nvidia-cuda-mps-control on PATH, a CUDA MPS control daemon (class Mps)
     serves the study: without it the processes are time-sliced, and tiny launch-bound models do not
     overlap their kernels. Private pipe and log folders under --work, exported to every process;
     `quit` at the end, also after an error or a signal. If it does not start or answer: one line, and
     the study goes on without it; if it answers but no run of the probe's first wave logs a step, it
     is stopped and the probe starts again without it. --no-mps: off. study.json: mps, mps_note.
  1. The runs are the sweep file's, as `linea submit SWEEP --dry-run` expands them (base config and
     overrides); the preset's overrides (below) and --set are laid over them, last one winning.
  2. Probe (probe, probe_timing): the step time at steady full load. In r1 each probe trained 12-15
     steps and ended; processes of a wave started and ended at different times, so most steps were
     timed beside fewer than --jobs trainings (and beside other probes' start-up on the CPU). Now the
     runs go in waves of --jobs (the last filled up with untimed repeats), whose processes train until
     each timed run has logged probe_steps steps since every process of the wave passed step 3, or
     the wave's cap (probe_cap, and the probe at most 0.2 x budget); then SIGKILL. Step time t_i: the
     median of those steady steps; fixed cost o_i: the time to step 3 less 3 steps, + end_s (final
     val evaluation, checkpoint, exit).
  3. Order (queue_order): the sweep's baseline first, then one run of every other mixer (its pure run
     at the baseline's width), then the rest, longest first within each group: with 11 slots the first
     wave holds the baseline and every mixer, which a deadline then cannot leave unstarted.
  4. Steps (plan_steps): one count S for every run (the runs see the same tokens), the largest multiple
     of 10 in [min_steps, the sweep's train.steps] whose schedule (queue order, --jobs slots, a run
     costing o_i + t_i x (S + its periodic val evaluations)) ends within plan_share = 0.6 of the time
     left before the training deadline: 0.4 is room for a mis-estimate (r1 planned at 0.8 and was off
     by 2x). Runs over 2.5x the median step time get their own smaller S when that lets the others
     train 1.5x longer. Warm-up and eval_every scale with S. --steps N skips the probe.
  5. Re-plan (replan_steps): every 10 s while runs wait to start, the running runs' step times
     (metrics.jsonl) against their probe's; when the median ratio k exceeds 1.1, the runs not yet
     started get fewer steps (not under min_steps), so that the last ends within 0.8 x the time left
     at k x their probed step time. Started runs keep theirs (train.steps fixes their cosine
     schedule); the tables show each run's steps. Every run reaching min_steps matters more than a
     large S.
  6. Train: `linea train BASE OVERRIDES` per run, at most --jobs processes. At the training deadline
     every run still going gets SIGTERM (linea stops after the step it is in, writes a checkpoint and
     its last metrics; its val figures stay those of its last periodic evaluation) and SIGKILL 30 s
     later; a run not yet started by then is listed as not run.
  7. Evaluate (recall only): `linea eval RUN --tasks niah_single,niah_multikey_1,mqar --lengths 1024
     --limit 8` on each run's last checkpoint: what the recall table needs (niah_single is
     niah_single_1..3), 5 tasks of one generate batch of 8. r1's ruler,mqar x 16 samples (13 tasks, 26
     batches) took over 100 s a run under load and was mostly killed. Evaluations share the --jobs
     slots and start once every training has started (a training never waits for one). Reserve:
     at worst every evaluation is still to do then, ceil(runs / jobs) in a slot, each the slowest
     run's o_i + eval_steps_per_batch (15) x t_i per task batch (r1: 12-14 s a task of 2 batches at
     0.4-0.6 s a step), at most 0.4 x budget; the training deadline is budget - margin - reserve.
     Killed at budget - margin (what they printed by then is kept: the report reads eval.log when
     eval.jsonl is missing). --eval-tasks, --eval-limit, --eval-lengths, --eval-reserve override.
  8. Report: OUT/results.tsv, results.json, results.md (Markdown tables; the recall one with seed
     001's claim beside it) and plot.svg; OUT/runs.tar.gz (OUT/runs/ with --keep-runs-dir) holds each
     run's config.toml, metrics.jsonl, eval.jsonl, train.log, eval.log and run.json (the
     orchestrator's record: steps, exit status, times). Checkpoints stay in --work (default
     /tmp/linea-recall-study/STUDY). OUT/progress.log repeats the progress lines; OUT/study.json holds
     the plan (probe timings, queue order, S and how, re-plans, the evaluation reserve, MPS).

The budgets (presets below). The lead's device call is 10 minutes at most, of which a fresh
machine's set-up and linea's CUDA build take a part, so each study's default budget is 360 s of wall
time from the script's start to its last file; one study per call. S is not guessed: the GPU step of
such small models is bound by kernel launches and by how the GPU is shared, not by FLOPs, so the
probe measures it at the study's own concurrency. --jobs 11 for both: 11 recall processes of 16 x 1024
tokens a step stay well inside 80 GB (r1 ran 16 at once), and the first wave then holds the baseline
and one run of each of the 10 other mixers.
"""
import argparse
import fcntl
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MIXERS = ["attention", "deltanet", "gdn", "kda", "gdn2", "gla", "retnet", "hgrn", "hgrn2", "mamba2", "rwkv6"]

PRESETS = {
    "mqar": {
        "sweep": "configs/sweeps/mqar-mixers-width.toml",
        "budget": 360,
        "jobs": 11,
        "probe_steps": 10,  # steady-state steps each probe run must log before its wave ends
        "probe_cap": 25,  # s a probe wave may last at most
        "plan_share": 0.6,  # the planned makespan's share of the time left for training
        "end_s": 3.0,  # a run's cost after its last step (final val evaluation, exit), not probed
        "min_steps": 100,
        "eval_reserve": 0,
        "margin": 20,
        "evals_per_run": 8,  # eval_every = S / 8: a run stopped at the deadline still has a recent val_acc
        "val_batch_steps": 1.0,  # two forward passes a val batch (val_loss, val_acc): about a step on the CPU
        "set": [
            "train.log_every=10",
            "train.checkpoint_every=-1",  # nothing reads an MQAR checkpoint: its accuracy is val_acc
            "train.eval_batches=8",
        ],
        "eval_tasks": None,
    },
    "recall": {
        "sweep": "configs/sweeps/recall-study-reduced.toml",
        "budget": 360,
        "jobs": 11,
        "probe_steps": 6,
        "probe_cap": 30,
        "plan_share": 0.6,
        "end_s": 5.0,  # the final val evaluation and the checkpoint
        "min_steps": 100,
        "eval_reserve": None,  # sized after the probe (eval_seconds); --eval-reserve fixes it
        "margin": 20,
        "evals_per_run": 4,
        "val_batch_steps": 0.5,  # one forward pass a val batch (fwd+bwd is about 3 forward passes), with room
        "set": [
            # The sweep's data.path is a placeholder for FineWeb-Edu shards; the embedded corpus
            # (gcide, SentencePiece 4096) is what the GPU machine has ($LINEA_CACHE). Its vocabulary
            # is 4096, so the model's is 4096 too (the 340M configs say 32000).
            "data.path=default",
            "model.vocab=4096",
            "train.log_every=10",
            "train.checkpoint_every=0",  # only the last step's (or the stop signal's)
            "train.keep_checkpoints=1",
            "train.eval_batches=4",
        ],
        # What results.md's recall table needs: the single-needle and the first multi-key NIAH tasks
        # (niah_single selects niah_single_1..3) and the mqar task; 5 tasks of one generate batch.
        "eval_tasks": "niah_single,niah_multikey_1,mqar",
        "eval_lengths": "1024",  # the training context
        "eval_limit": 8,  # samples per task: one generate batch of 8
        "eval_steps_per_batch": 15,  # an eval task's batch costs about 15 training steps (run r1, below)
    },
}

LOCK_FILE = "/tmp/linea-recall-study.lock"

# linea eval's RULER task names (`linea eval --help`); `ruler` is all of them, a prefix selects those it begins.
RULER_TASKS = ["niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2",
               "niah_multikey_3", "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_synthetic"]

SEED001_CLAIM = (
    "at 340M and 1.3B (FineWeb-Edu; RULER at 4K context) recall is highly sensitive to the linear:full "
    "ratio and rises with the share of full-attention layers; pure linear models score about 0.1-0.35 on "
    "RULER; at 3:1 recall approaches or passes the Transformer baseline (DeltaNet and Gated DeltaNet peak "
    "there); HGRN-2 doubles HGRN's recall; additive GLA struggles to reach Transformer-level recall at any "
    "ratio; language modelling barely moves from 24:1 to 3:1. The reduced study differs: d 256, 8 layers "
    "(Mamba-2 16), the embedded dictionary corpus, context 1024, minutes of training."
)


def now():
    return time.monotonic()


ABORT = {"signal": None}  # set by SIGTERM / SIGINT: every pool stops its jobs as at a deadline


def on_signal(sig, frame):
    ABORT["signal"] = sig


class Log:
    def __init__(self, path, start):
        self.file = open(path, "a", buffering=1) if path else None
        self.start = start

    def __call__(self, text):
        line = "[recall-study %s +%4.0fs] %s" % (time.strftime("%H:%M:%S"), now() - self.start, text)
        print(line, flush=True)
        if self.file:
            self.file.write(line + "\n")


# ---- one study per GPU, and CUDA MPS ----------------------------------------------------------------


def study_lock(path, what):
    """Holds an exclusive flock on `path` for the life of the process (the kernel drops it when the
    process ends, however it ends). A second study fails at once: the probe's step times and the plan
    assume that the GPU runs this study's processes only."""
    f = open(path, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise SystemExit("another study holds %s (%s): one study per device call. The probe times the "
                         "steps with this study's processes alone on the GPU; a second study beside it "
                         "makes every step slower than planned and the deadlines cut both." % (path, holder))
    f.seek(0)
    f.truncate()
    f.write("pid %d, %s, since %s" % (os.getpid(), what, time.strftime("%H:%M:%S")))
    f.flush()
    return f


class Mps:
    """A CUDA MPS control daemon for the study: the trainings share the GPU's SMs as one context
    instead of time-slicing between process contexts. Private pipe and log folders under `folder`,
    exported to every child through `env`; stopped by stop() (`quit`), which run_study calls in a
    finally clause, so errors and SIGTERM/SIGINT (which end the study as at a deadline) stop it too."""

    CONTROL = "nvidia-cuda-mps-control"

    def __init__(self, folder, log):
        self.folder, self.log = folder, log
        self.env = {}
        self.on = False
        self.note = ""

    def control(self, command, timeout=10):
        env = dict(os.environ, **self.env)
        return subprocess.run([self.CONTROL], input=command + "\n", capture_output=True, text=True,
                              env=env, timeout=timeout)

    def start(self):
        if not shutil.which(self.CONTROL):
            self.note = "%s is not on PATH" % self.CONTROL
            self.log("MPS off: " + self.note)
            return False
        pipe, logs = os.path.join(self.folder, "pipe"), os.path.join(self.folder, "log")
        os.makedirs(pipe, exist_ok=True)
        os.makedirs(logs, exist_ok=True)
        self.env = {"CUDA_MPS_PIPE_DIRECTORY": pipe, "CUDA_MPS_LOG_DIRECTORY": logs}
        try:
            started = subprocess.run([self.CONTROL, "-d"], capture_output=True, text=True,
                                     env=dict(os.environ, **self.env), timeout=15)
            answer = self.control("get_server_list") if started.returncode == 0 else started
        except (OSError, subprocess.SubprocessError) as e:
            answer = subprocess.CompletedProcess([], 1, "", str(e))
        if answer.returncode != 0:
            self.note = "the daemon did not start or answer (exit %s: %s)" % (
                answer.returncode, (answer.stderr or answer.stdout).strip()[:200])
            self.log("MPS off, continuing without it: " + self.note)
            self.stop()
            self.env = {}
            return False
        self.on = True
        self.note = "control daemon in %s" % self.folder
        self.log("MPS on: " + self.note)
        return True

    def stop(self):
        if not self.env:
            return
        try:
            self.control("quit")
        except (OSError, subprocess.SubprocessError):
            pass
        if self.on:
            self.log("MPS control daemon stopped")
        self.on = False

    def give_up(self, why):
        """Stops the daemon and drops its variables: the processes from now on run without MPS."""
        self.stop()
        self.env = {}
        self.note = why
        self.log("MPS off from here on: " + why)


# ---- the runs of a sweep ---------------------------------------------------------------------------


def split_override(o):
    key, _, value = o.partition("=")
    return key, value


def merge_overrides(*lists):
    merged = {}
    for lst in lists:
        for o in lst:
            key, value = split_override(o)
            merged.pop(key, None)  # the last one wins, in its own place
            merged[key] = value
    return merged


def expand_sweep(linea, sweep):
    """[(label, base config, {key: value})] from `linea submit SWEEP --dry-run`."""
    out = subprocess.run([linea, "submit", sweep, "--dry-run"], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("linea submit %s --dry-run failed:\n%s%s" % (sweep, out.stdout, out.stderr))
    runs = []
    for line in out.stdout.splitlines():
        fields = line.split()
        if len(fields) < 3 or not fields[1].startswith("np="):
            continue
        if fields[1] != "np=1":
            raise SystemExit("%s asks for %s ranks; this script runs one process a run" % (fields[0], fields[1]))
        label = fields[0].split("/", 1)[-1]
        overrides = merge_overrides([o for o in fields[3:] if not o.startswith(("run.dir=", "run.name="))])
        runs.append({"label": label, "base": fields[2], "overrides": overrides})
    if not runs:
        raise SystemExit("linea submit %s --dry-run listed no runs:\n%s" % (sweep, out.stdout))
    return runs


def unquote(value):
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value


def base_value(path, section, key):
    """A key of a base config's TOML section, read by hand (flat tables, scalar values)."""
    current = None
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line.startswith("["):
                current = line.strip("[] ")
            elif current == section and "=" in line:
                k, _, v = line.partition("=")
                if k.strip() == key:
                    return unquote(v.strip())
    return None


def attention_layers(layers, hybrid, mixer):
    """Attention layers of a stack, as README's `model.hybrid` rule: "r:1" cuts the stack into groups of
    r + 1 with attention at the end of every whole group; a stack shorter than one group gets one."""
    if mixer == "attention":
        return layers
    if hybrid in (None, "", "pure"):
        return 0
    m = re.fullmatch(r"(\d+):1", hybrid)
    if not m:
        return None
    group = int(m.group(1)) + 1
    return max(1, layers // group)


def describe(run):
    """mixer, hybrid, d_model, layers, attention layers of a run, from its base config and overrides."""
    o = run["overrides"]
    mixer = unquote(o.get("model.mixer", "")) or base_value(run["base"], "model", "mixer")
    hybrid = unquote(o.get("model.hybrid", "")) or base_value(run["base"], "model", "hybrid") or "pure"
    d = int(o.get("model.d_model") or base_value(run["base"], "model", "d_model"))
    layers = int(o.get("model.layers") or base_value(run["base"], "model", "layers"))
    attn = attention_layers(layers, hybrid, mixer)
    return {
        "mixer": mixer,
        "hybrid": "full" if mixer == "attention" else hybrid,
        "d_model": d,
        "layers": layers,
        "attention_layers": attn,
        "attention_share": None if attn is None else attn / layers,
    }


def queue_order(runs, baseline, cost):
    """The order the runs start in: the sweep's baseline (else the first attention run) first, then one
    run of every other mixer (its pure run, at the baseline's width or the nearest), then the rest;
    longest first (`cost`) within each group. So the first wave holds the baseline and every mixer when
    --jobs allows, and a run that the deadline leaves unstarted is never one of these."""
    base = next((r for r in runs if r["label"] == baseline), None) or \
        next((r for r in runs if r["mixer"] == "attention"), None)
    lead = []
    for m in dict.fromkeys(r["mixer"] for r in runs):
        if base is not None and m == base["mixer"]:
            continue
        mine = [r for r in runs if r["mixer"] == m]
        pure = [r for r in mine if r["hybrid"] in ("pure", "full")] or mine
        width = base["d_model"] if base is not None else pure[0]["d_model"]
        lead.append(min(pure, key=lambda r: abs(r["d_model"] - width)))
    rest = [r for r in runs if r is not base and r not in lead]
    longest = lambda group: sorted(group, key=lambda r: -cost(r))
    return ([base] if base is not None else []) + longest(lead) + longest(rest)


def eval_task_count(tasks):
    """How many tasks `linea eval --tasks LIST` runs: `ruler` is the 12 RULER tasks, a prefix those it begins."""
    n = 0
    for name in (t.strip() for t in tasks.split(",") if t.strip()):
        if name == "ruler":
            n += len(RULER_TASKS)
        else:
            n += max(1, sum(t.startswith(name) for t in RULER_TASKS))
    return n


# ---- processes -----------------------------------------------------------------------------------


class Job:
    def __init__(self, name, argv, log_path, env, on_end=None, metrics_path=None):
        self.name, self.argv, self.log_path, self.env = name, argv, log_path, env
        self.on_end, self.metrics_path = on_end, metrics_path
        self.proc = None
        self.started = self.ended = None
        self.rc = None
        self.stopped = False  # SIGTERM sent at a deadline
        self.killed = False  # SIGKILL sent

    def start(self):
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT)
        self.started = now()

    def poll(self):
        if self.proc is None or self.rc is not None:
            return self.rc
        rc = self.proc.poll()
        if rc is not None:
            self.rc, self.ended = rc, now()
            self.log.close()
        return rc

    def signal(self, sig):
        if self.proc is not None and self.rc is None:
            try:
                self.proc.send_signal(sig)  # this job's own pid only
            except ProcessLookupError:
                pass


def reap(jobs, how, log):
    """Removes the ended jobs from `jobs`, logging each (`how(job)` adds why it ended) and
    calling its on_end."""
    for j in list(jobs):
        if j.poll() is not None:
            jobs.remove(j)
            log("%s ended: exit %s after %.0f s%s" % (j.name, j.rc, j.ended - j.started, how(j)))
            if j.on_end:
                j.on_end(j)


def drop_unstarted(queue, what, log):
    """Empties `queue` at the `what` deadline: each job not started is logged and ends as "not run"."""
    for j in queue:
        log("%s not started: the %s deadline has passed" % (j.name, what))
        j.rc = "not run"
        if j.on_end:
            j.on_end(j)
    queue.clear()


def start_up_to(slots, queue, running):
    """Starts jobs from the front of `queue` until `running` holds `slots` of them."""
    while queue and len(running) < slots:
        j = queue.pop(0)
        j.start()
        running.append(j)


def run_pool(jobs, slots, deadline, log, grace=30.0, status=None, extra=None, tick=None):
    """Runs `jobs` (a list, started in order) `slots` at a time. At `deadline` a running job gets
    SIGTERM and `grace` s later SIGKILL; jobs not started by then stay unstarted. `extra` is a
    second pool (evaluations) fed by on_end callbacks, (list, deadline): its jobs share the `slots`
    and start only once every job of the first pool has started (a training never waits for an
    evaluation), and are killed at their own deadline. `tick(running, queue)` is called every 10 s
    while jobs wait to start (the re-plan); `status(running, extra running)` every 15 s."""
    queue = list(jobs)
    running = []
    extra_queue, extra_deadline = extra if extra else ([], None)
    extra_running = []
    last_status = last_tick = now()
    while queue or running or extra_queue or extra_running:
        t = now()
        if ABORT["signal"] is not None:  # stop everything now, as at both deadlines
            deadline = min(deadline, t)
            grace = min(grace, 5.0)
            if extra:
                extra_deadline = t
        reap(running, lambda j: " (stopped at the deadline)" if j.stopped else "", log)
        reap(extra_running, lambda j: " (killed at the deadline)" if j.killed else "", log)
        if t >= deadline:
            drop_unstarted(queue, "training", log)
            for j in running:
                if not j.stopped:
                    j.stopped = True
                    j.stop_time = t
                    j.signal(signal.SIGTERM)
                elif not j.killed and t >= j.stop_time + grace:
                    j.killed = True
                    j.signal(signal.SIGKILL)
        if tick and queue and t - last_tick >= 10:
            last_tick = t
            tick(running, queue)
        start_up_to(slots, queue, running)
        if extra:
            if extra_deadline is not None and t >= extra_deadline:
                drop_unstarted(extra_queue, "evaluation", log)
                for j in extra_running:
                    if not j.killed:
                        j.killed = True
                        j.signal(signal.SIGKILL)
            if not queue:
                start_up_to(slots - len(running), extra_queue, extra_running)
        if status and t - last_status >= 15 and (running or extra_running):
            last_status = t
            status(running, extra_running)
        time.sleep(0.25)


def read_metrics(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut by a kill
    except OSError:
        pass
    return rows


def last_step(path):
    rows = read_metrics(path)
    return rows[-1].get("step", 0) if rows else 0


# ---- the study -----------------------------------------------------------------------------------


def train_argv(linea, run, overrides, run_dir, name):
    return [linea, "train", run["base"]] + ["%s=%s" % kv for kv in overrides.items()] + \
           ["run.dir=%s" % run_dir, "run.name=%s" % name]


def process_env(threads, extra):
    env = dict(os.environ, **extra)
    env["OMP_NUM_THREADS"] = str(threads)
    return env


def schedule_end(costs, free):
    """List scheduling in the order given: each job starts on the slot that frees first (`free`: when
    each slot frees). When the last of these jobs ends (0 for none)."""
    free = list(free)
    end = 0.0
    for c in costs:
        i = free.index(min(free))
        free[i] += c
        end = max(end, free[i])
    return end


def makespan(costs, slots):
    """List scheduling in the order given, on `slots` free slots: when the last slot finishes."""
    return schedule_end(costs, [0.0] * max(1, slots))


def run_cost(r, steps, evals, eval_steps, k=1.0):
    """Seconds of a run of `steps` steps: its fixed cost, and its steps and `evals` periodic val
    evaluations (each costing `eval_steps` steps) at k x its probed step time."""
    return r["overhead_s"] + k * r["step_s"] * (steps + evals * eval_steps)


def largest_steps(fits, min_steps, max_steps):
    """The largest multiple of 10 in [min_steps, max_steps] for which fits(S) holds (fits is monotone);
    min_steps when none does."""
    lo, hi, best = min_steps, max(min_steps, max_steps), min_steps
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(mid):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return max(min_steps, best // 10 * 10)


def plan_steps(runs, jobs, window, min_steps, max_steps, evals, eval_steps):
    """Each run's steps from its probe (step_s, overhead_s): one S for all, the largest multiple of 10 in
    [min_steps, max_steps] whose schedule, the runs in the given (queue) order over `jobs` slots, ends
    within `window` s. Stragglers, runs over 2.5x the median step time, would set everyone's S: when
    giving them their own smaller S (each the most that fits the window alone in its slot) lets the
    others train at least 1.5x longer, that is done. Sets r["steps"] on every run; returns (S, the
    projected makespan, the rule in words)."""
    cost = lambda r, s: run_cost(r, s, evals, eval_steps)
    steps = largest_steps(lambda s: makespan([cost(r, s) for r in runs], jobs) <= window, min_steps, max_steps)
    median_t = statistics.median(r["step_s"] for r in runs)
    slow = [r for r in runs if r["step_s"] > 2.5 * median_t]
    rule = "one S for every run"
    own = {}
    if slow and len(slow) < jobs:
        for r in slow:
            own[r["label"]] = largest_steps(lambda s, r=r: cost(r, s) <= window, min_steps, max_steps)
        each = lambda s: [cost(r, own[r["label"]] if r["label"] in own else s) for r in runs]
        fast_steps = largest_steps(lambda s: makespan(each(s), jobs) <= window, min_steps, max_steps)
        if fast_steps >= 1.5 * steps:
            steps = fast_steps
            rule = ("S for the runs within 2.5x the median step time; %s: fewer steps, each the most that fits "
                    "alone (%s)" % (", ".join(r["label"] for r in slow), ", ".join(str(own[r["label"]]) for r in slow)))
        else:
            own = {}
    for r in runs:
        r["steps"] = own.get(r["label"], steps)
    return steps, makespan([cost(r, r["steps"]) for r in runs], jobs), rule


def replan_steps(free, queued, k, window, min_steps, evals, eval_steps):
    """S for the runs not started yet when the running ones go k times slower than probed: the
    largest multiple of 10 in [min_steps, their largest planned S] such that, started in queue order
    on the slots as they free (`free`, s from now), each at k x its probed step time and at most its
    planned steps, the last one ends within `window` s. Never more than planned (the runs already
    going keep their S: train.steps fixes their cosine schedule)."""
    top = max(r["steps"] for r in queued)
    return largest_steps(lambda s: schedule_end([run_cost(r, min(s, r["steps"]), evals, eval_steps, k)
                                                 for r in queued], free) <= window, min_steps, top)


def observed_step_s(rows, planned):
    """A running run's step time from its metrics lines (every log_every steps): the median over its
    last five intervals past step 10 (an interval holding a val evaluation is the odd one out), None
    before two such lines. Also its last step."""
    rows = [m for m in rows if "elapsed_s" in m and m.get("step", 0) >= 10]
    per_step = [(b["elapsed_s"] - a["elapsed_s"]) / (b["step"] - a["step"])
                for a, b in zip(rows, rows[1:]) if b["step"] > a["step"]][-5:]
    return (statistics.median(per_step) if per_step else None), (rows[-1]["step"] if rows else 0)


def probe_timing(jobs, warm):
    """Step times of one probe wave at steady load. jobs: {name: (started, [(step, elapsed_s, seen)])},
    `seen` the monotonic time the script first read the line. elapsed_s counts from the start of the
    job's training loop, so its clock's offset is min(seen - elapsed_s). The load is steady once every
    job has logged step `warm` (all are past start-up and in their loops): steady_start, None before.
    Returns (steady_start, {name: None or {step_s, overhead_s, steady_steps, steady}}): step_s is the
    median of the step intervals that begin at or after steady_start (steady: True), or, with fewer than
    two of those, of all intervals after step `warm` (steady: False); overhead_s is the time from the
    process's start to step `warm` less `warm` steps at step_s (start-up, CUDA set-up, first-step plans)."""
    offset, reached = {}, {}
    for name, (started, rows) in jobs.items():
        if rows:
            offset[name] = min(seen - el for _, el, seen in rows)
            at = [offset[name] + el for st, el, _ in sorted(rows) if st >= warm]
            reached[name] = at[0] if at else None
    waiting = [n for n in jobs if reached.get(n) is None]
    steady_start = None if waiting or not jobs else max(reached.values())
    out = {}
    for name, (started, rows) in jobs.items():
        rows = sorted(rows)
        spans = [(offset[name] + a[1], b[1] - a[1]) for a, b in zip(rows, rows[1:])
                 if b[0] == a[0] + 1 and a[0] >= warm]
        steady = [d for t0, d in spans if steady_start is not None and t0 >= steady_start]
        use = steady if len(steady) >= 2 else [d for _, d in spans]
        if not use:
            out[name] = None
            continue
        t = statistics.median(use)
        out[name] = {"step_s": t, "overhead_s": max(0.0, reached[name] - started - warm * t),
                     "steady_steps": len(steady), "steady": len(steady) >= 2}
    return steady_start, out


def probe(runs, jobs, deadline, steady_steps, wave_cap, make_job, log, warm=3):
    """Times every run's step with all `jobs` slots busy for the whole probe. The runs go in waves of
    `jobs`, each wave a mix of mixers and sizes (every waves-th run of the queue order); the last wave
    is filled up with repeats of other runs (fillers, not timed) so that it holds `jobs` processes too.
    A wave's processes start together and train until the wave ends: when each timed run has logged
    `steady_steps` steps since every process of the wave passed step `warm` (probe_timing), or at the
    wave's cap (min(wave_cap, its share of the time left to `deadline`)); then all get SIGKILL. Sets
    step_s and overhead_s on each timed run. Returns {label: "ok" | "unmeasured" | "failed: why"}, or
    None when no run of the first wave logged a step."""
    waves_n = math.ceil(len(runs) / jobs)
    order = [r for w in range(waves_n) for r in runs[w::waves_n]]
    waves = [order[i:i + jobs] for i in range(0, len(order), jobs)]
    result = {}
    for w, members in enumerate(waves):
        t = now()
        if ABORT["signal"] is not None or t >= deadline:
            for r in members:
                result[r["label"]] = "unmeasured"
            continue
        fillers = [r for r in order if r not in members][:jobs - len(members)]
        wave_end = min(deadline, t + wave_cap, t + (deadline - t) / (len(waves) - w))
        timed = [(r, make_job(r, "probe")) for r in members]
        extra = [(r, make_job(r, "probe-filler")) for r in fillers]
        for _, j in timed + extra:
            j.start()
        seen = {j: {} for _, j in timed + extra}
        log("probe wave %d/%d: %s%s, until %d steady steps each or %.0f s" % (
            w + 1, len(waves), ", ".join(r["label"] for r in members),
            " (+ %d fillers)" % len(fillers) if fillers else "", steady_steps, wave_end - t))
        while True:
            t = now()
            for _, j in timed + extra:
                for m in read_metrics(j.metrics_path):
                    if "elapsed_s" in m:
                        seen[j].setdefault(m["step"], (m["elapsed_s"], t))
                j.poll()
            live = {j: (j.started, [(st, el, sn) for st, (el, sn) in seen[j].items()])
                    for _, j in timed + extra if j.rc in (None, 0)}  # one that ended otherwise failed
            steady_start, timing = probe_timing(live, warm)
            enough = all(j.rc is not None or (timing.get(j) or {}).get("steady_steps", 0) >= steady_steps
                         for _, j in timed)
            if enough or t >= wave_end or ABORT["signal"] is not None:
                break
            time.sleep(0.2)
        for _, j in timed + extra:
            if j.rc is None:
                j.killed = True
                j.signal(signal.SIGKILL)
                j.proc.wait()
                j.poll()
        for r, j in timed:
            tm = timing.get(j)
            if j.rc not in (None, 0) and not j.killed:
                result[r["label"]] = "failed: exit %s after %d steps" % (j.rc, len(seen[j]))
                r["probe_log_tail"] = read_tail(j.log_path)
                log("probe %s FAILED (exit %s, %d steps): dropped from the study\n%s" %
                    (r["label"], j.rc, len(seen[j]), r["probe_log_tail"]))
            elif tm is None:
                result[r["label"]] = "unmeasured"
            else:
                result[r["label"]] = "ok"
                r["step_s"], r["overhead_s"] = tm["step_s"], tm["overhead_s"]
                r["probe"] = {"probe_step_s": round(tm["step_s"], 5), "probe_overhead_s": round(tm["overhead_s"], 2),
                              "probe_steady_steps": tm["steady_steps"], "probe_steady": tm["steady"],
                              "probe_wave": w + 1}
                log("probe %-26s %7.1f ms/step over %d steady steps, fixed cost %5.1f s%s" % (
                    r["label"], 1e3 * tm["step_s"], tm["steady_steps"], tm["overhead_s"],
                    "" if tm["steady"] else " (NOT at steady load: the wave ended first)"))
        if w == 0 and not any(seen[j] for _, j in timed):
            return None  # no process logged a step: nothing trains (under MPS, run_study retries without it)
    return result


def selftest():
    """Checks of the planner, the probe's timing, the re-plan, eval.log's metrics, the lock, the MPS daemon's start and stop
    (with a fake nvidia-cuda-mps-control on PATH) and the pool's shared slots, on made-up figures and
    small processes (no linea, no GPU needed)."""
    import tempfile
    mk = lambda label, t, o=2.0, **kw: dict({"label": label, "step_s": t, "overhead_s": o}, **kw)
    # 4 equal runs on 2 slots, 100 s: two after another in a slot, each 2 + 0.1 x (S + 8 evaluations x 1):
    # 2 x (2 + 0.1 (S + 8)) <= 100 -> S <= 472 -> 470.
    runs = [mk("r%d" % i, 0.1) for i in range(4)]
    steps, span, rule = plan_steps(runs, 2, 100.0, 100, 4000, 8, 1.0)
    assert steps == 470 and span <= 100.0 and all(r["steps"] == 470 for r in runs), (steps, span)
    # Capped by the sweep's own steps.
    steps, _, _ = plan_steps([mk("a", 0.001)], 2, 100.0, 100, 4000, 8, 1.0)
    assert steps == 4000, steps
    # Too slow for even min_steps: min_steps, and the makespan says it does not fit.
    steps, span, _ = plan_steps([mk("a", 1.0)], 2, 50.0, 100, 4000, 8, 1.0)
    assert steps == 100 and span > 50.0, (steps, span)
    # A straggler 10x slower, first in the queue: it gets its own S, the most that fits alone
    # (2 + 0.5 S <= 120 -> 230); the five others share the two other slots, three in one:
    # 3 (2 + 0.05 S) <= 120 -> S = 760.
    runs = [mk("slow", 0.5)] + [mk("f%d" % i, 0.05) for i in range(5)]
    steps, span, rule = plan_steps(runs, 3, 120.0, 100, 4000, 0, 0)
    assert runs[0]["steps"] == 230 and steps == 760 and span <= 120.0, (steps, runs[0]["steps"], span)
    assert all(r["steps"] == steps for r in runs[1:]) and "slow" in rule, rule
    # The schedule keeps the queue order (the baseline first), and schedule_end counts only its jobs.
    assert makespan([5, 4, 3, 3], 2) == 8 and makespan([1, 1, 1], 5) == 1 and makespan([3, 3, 5], 2) == 8
    assert schedule_end([1, 1], [10.0, 0.0, 0.0]) == 1 and schedule_end([], [5.0]) == 0
    # Queue order: the sweep's baseline, then one pure run of every other mixer at the baseline's
    # width, longest first, then the rest.
    d = lambda label, mixer, hybrid, width, t: mk(label, t, mixer=mixer, hybrid=hybrid, d_model=width)
    runs = [d("gdn-pure", "gdn", "pure", 256, 0.2), d("gdn-3to1", "gdn", "3:1", 256, 0.9),
            d("tf", "attention", "full", 256, 0.1), d("kda-3to1", "kda", "3:1", 256, 0.3),
            d("kda-pure", "kda", "pure", 256, 0.5), d("tf-64", "attention", "full", 64, 0.05)]
    order = [r["label"] for r in queue_order(runs, "tf", lambda r: r["step_s"])]
    assert order == ["tf", "kda-pure", "gdn-pure", "gdn-3to1", "kda-3to1", "tf-64"], order
    assert [r["label"] for r in queue_order(runs, None, lambda r: 0)][0] == "tf"
    widths = [d("m-%d" % w, "m", "pure", w, 0.1) for w in (64, 128, 256)] + [d("t", "attention", "full", 128, .1)]
    assert [r["label"] for r in queue_order(widths, "t", lambda r: 0)][:2] == ["t", "m-128"]
    # An eval.log line (the fallback when eval.jsonl is missing) gives every metric it prints.
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "eval.log"), "w") as f:
            f.write("niah_single_1 @1024 (8): score 12.5000 ± 12.5000 answer_nll 6.2500 ± 0.2000 "
                    "answer_greedy 0.0000 ± 0.0000\nmqar @256 (8): acc 0.5000 ± 0.1000 answer_nll 1.5 ± 0.25\n")
        ev, source = read_eval(folder)
        assert source == "eval.log" and ev["niah_single_1@1024"] == {
            "score": (12.5, 12.5, 8), "answer_nll": (6.25, 0.2, 8), "answer_greedy": (0.0, 0.0, 8)} and \
            ev["mqar@256"] == {"acc": (0.5, 0.1, 8), "answer_nll": (1.5, 0.25, 8)}, ev
    # Re-plan: runs 2x slower than probed. One slot frees now, one in 50 s; two queued runs of
    # 2 + 2 x 0.1 S within 100 s: the second starts at 50 -> 52 + 0.2 S <= 100 -> S = 240.
    queued = [mk("q1", 0.1, steps=1000), mk("q2", 0.1, steps=1000)]
    assert replan_steps([50.0, 0.0], queued, 2.0, 100.0, 100, 0, 0) == 240
    # Never more than planned, never under min_steps.
    assert replan_steps([0.0, 0.0], [mk("q", 0.1, steps=300)], 1.0, 1000.0, 100, 0, 0) == 300
    assert replan_steps([900.0], [mk("q", 0.1, steps=300)], 2.0, 100.0, 100, 0, 0) == 100
    # A running run's step time: the median of its last intervals past step 10 (the val evaluation's
    # interval is the odd one out).
    rows = [{"step": s, "elapsed_s": 0.5 * s + (3.0 if s >= 40 else 0.0)} for s in range(10, 80, 10)]
    assert observed_step_s(rows, 100) == (0.5, 70) and observed_step_s(rows[:1], 100)[0] is None
    # The probe's timing: job a starts at 0, its loop at 4 s, 0.1 s a step while alone, 0.3 s once b
    # runs; b starts at 0 and reaches step 3 at 8 s. Steady from 8 s: a's intervals after 8 s only.
    a_rows = [(s, 0.1 * s, 4.0 + 0.1 * s + 0.05) for s in range(1, 31)]
    a_rows += [(31 + i, 3.0 + 0.3 * (i + 1), 4.0 + 3.0 + 0.3 * (i + 1) + 0.05) for i in range(10)]
    b_rows = [(s, 0.3 * s, 7.1 + 0.3 * s) for s in range(1, 11)]
    steady, timing = probe_timing({"a": (0.0, a_rows), "b": (0.0, b_rows)}, 3)
    assert abs(steady - 8.0) < 1e-9, steady
    assert abs(timing["a"]["step_s"] - 0.3) < 1e-9 and timing["a"]["steady"], timing["a"]
    assert abs(timing["b"]["step_s"] - 0.3) < 1e-9 and abs(timing["b"]["overhead_s"] - 7.1) < 1e-9, timing["b"]
    # Not steady while a job of the wave has not reached step 3: the intervals are used but flagged.
    steady, timing = probe_timing({"a": (0.0, a_rows), "c": (0.0, [(1, 0.0, 9.0)])}, 3)
    assert steady is None and not timing["a"]["steady"] and timing["c"] is None
    # Tasks linea eval runs for a list.
    assert eval_task_count("niah_single,niah_multikey_1,mqar") == 5 and eval_task_count("ruler,mqar") == 13
    with tempfile.TemporaryDirectory() as tmp:
        # The lock: a second holder fails at once, naming the file and the holder.
        path = os.path.join(tmp, "lock")
        held = study_lock(path, "study one")
        try:
            study_lock(path, "study two")
            raise AssertionError("a second study took the lock")
        except SystemExit as e:
            assert path in str(e) and "study one" in str(e) and "one study per device call" in str(e), e
        held.close()
        study_lock(path, "study three").close()  # free again once the holder is gone
        # MPS: a fake control program that records its calls and the pipe folder it was given.
        bin_dir = os.path.join(tmp, "bin")
        os.makedirs(bin_dir)
        calls = os.path.join(tmp, "calls")
        fake = os.path.join(bin_dir, Mps.CONTROL)

        def write_fake(start_rc):
            with open(fake, "w") as f:
                f.write("#!/bin/sh\nif [ \"$1\" = -d ]; then echo \"start $CUDA_MPS_PIPE_DIRECTORY\" >> %s; "
                        "exit %d; fi\nread cmd; echo \"$cmd $CUDA_MPS_PIPE_DIRECTORY\" >> %s\n" % (calls, start_rc, calls))
            os.chmod(fake, 0o755)

        old_path = os.environ.get("PATH", "")
        os.environ["PATH"] = bin_dir + os.pathsep + old_path
        try:
            lines = []
            write_fake(0)
            mps = Mps(os.path.join(tmp, "mps"), lines.append)
            assert mps.start() and mps.on, lines
            pipe = os.path.join(tmp, "mps", "pipe")
            assert process_env(1, mps.env)["CUDA_MPS_PIPE_DIRECTORY"] == pipe
            assert process_env(1, mps.env)["CUDA_MPS_LOG_DIRECTORY"] == os.path.join(tmp, "mps", "log")
            mps.stop()
            assert open(calls).read().split("\n")[:3] == ["start " + pipe, "get_server_list " + pipe,
                                                         "quit " + pipe], open(calls).read()
            os.remove(calls)
            write_fake(1)  # the daemon does not start: off, one line, no variables for the children
            lines = []
            mps = Mps(os.path.join(tmp, "mps2"), lines.append)
            assert not mps.start() and not mps.on and mps.env == {} and len(lines) == 1, lines
            assert "MPS off" in lines[0] and "CUDA_MPS_PIPE_DIRECTORY" not in process_env(1, mps.env)
            os.environ["PATH"] = os.path.join(tmp, "empty")
            assert not Mps(os.path.join(tmp, "mps3"), lines.append).start() and "not on PATH" in lines[-1]
        finally:
            os.environ["PATH"] = old_path
        # The pool: evaluations share the slots and wait until every training has started.
        started, lines = [], []
        py = lambda secs: [sys.executable, "-c", "import time; time.sleep(%s)" % secs]
        evals, made = [], []

        def add_eval(job):
            e = Job("eval " + job.name, py(0.1), os.path.join(tmp, "e-%s.log" % job.name), None)
            evals.append(e)
            made.append(e)

        trains = [Job("t%d" % i, py(0.6), os.path.join(tmp, "t%d.log" % i), None, on_end=add_eval) for i in range(3)]
        original = Job.start

        def recording_start(self):
            original(self)
            started.append((self.name, now()))

        Job.start = recording_start
        try:
            run_pool(trains, 2, now() + 30, lines.append, extra=(evals, now() + 30))
        finally:
            Job.start = original
        t3 = next(t for n, t in started if n == "t2")
        first_eval = min(t for n, t in started if n.startswith("eval"))
        assert first_eval >= t3 and len(made) == 3 and all(e.rc == 0 for e in made), started
        for e in trains + made:  # never more than 2 processes at once
            overlapping = [o for o in trains + made if o is not e and o.started <= e.started < o.ended]
            assert len(overlapping) <= 1, (e.name, [o.name for o in overlapping])
    # best: two MQAR studies at lr 1e-3 and 3e-4; per mixer and width the higher val_acc and its lr,
    # a tie to the lower lr, a run without an evaluation left out; a recall study is refused.
    with tempfile.TemporaryDirectory() as tmp:
        def fake_run(study, label, mixer, width, lr, acc):
            d = os.path.join(tmp, study, "runs", label)
            os.makedirs(d)
            with open(os.path.join(d, "run.json"), "w") as f:
                json.dump({"label": label, "mixer": mixer, "d_model": width, "steps_planned": 100,
                           "overrides": {"optimizer.lr": lr}}, f)
            with open(os.path.join(d, "metrics.jsonl"), "w") as f:
                f.write(json.dumps({"step": 100, "loss": 1.0, "tokens_per_s": 1.0}) + "\n")
                if acc is not None:
                    f.write(json.dumps({"step": 100, "val_loss": 1.0, "val_acc": acc}) + "\n")
        for study, lr, accs in (("a", "0.001", (0.2, 0.9, 0.5, None)), ("b", "3e-4", (0.7, 0.4, 0.5, 0.1))):
            for (mixer, width), acc in zip((("gdn", 64), ("gdn", 128), ("attention", 64), ("attention", 128)), accs):
                fake_run(study, "%s_d_model-%d" % (mixer, width), mixer, width, lr, acc)
        best_of([os.path.join(tmp, "a"), os.path.join(tmp, "b")], os.path.join(tmp, "best"), log=lambda _: None)
        with open(os.path.join(tmp, "best", "best.json")) as f:
            chosen = {(b["mixer"], b["d_model"]): (b["val_acc"], b["lr"]) for b in json.load(f)["best"]}
        assert chosen == {("gdn", 64): (0.7, 3e-4), ("gdn", 128): (0.9, 1e-3), ("attention", 64): (0.5, 3e-4),
                          ("attention", 128): (0.1, 3e-4)}, chosen
        with open(os.path.join(tmp, "best", "best.md")) as f:
            md = f.read()
        assert "| gdn | 0.700 (lr 0.0003) | 0.900 (lr 0.001) |" in md and "| attention | 0.001 | 0.500 | — |" in md, md
        with open(os.path.join(tmp, "a", "study.json"), "w") as f:
            json.dump({"study": "recall"}, f)
        try:
            best_of([os.path.join(tmp, "a")], os.path.join(tmp, "best"), log=lambda _: None)
            raise AssertionError("best took a recall study")
        except SystemExit as e:
            assert "recall study" in str(e), e
    print("recall_study selftest: ok")
    return 0


def run_study(args):
    preset = PRESETS[args.study]
    start = now()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    log = Log(os.path.join(out, "progress.log"), start)
    budget = args.budget if args.budget is not None else preset["budget"]
    jobs = args.jobs or preset["jobs"]
    margin = preset["margin"] if args.margin is None else args.margin
    eval_tasks = (args.eval_tasks or preset["eval_tasks"]) if preset["eval_tasks"] else None
    eval_limit = args.eval_limit or preset.get("eval_limit")
    eval_lengths = args.eval_lengths or preset.get("eval_lengths")
    eval_deadline = start + budget - margin
    work = os.path.abspath(args.work or os.path.join("/tmp/linea-recall-study", args.study))
    linea = os.path.abspath(args.linea)
    if not os.access(linea, os.X_OK):
        raise SystemExit("%s is not an executable linea" % linea)
    sweep = os.path.join(ROOT, args.sweep or preset["sweep"])
    threads = max(1, (os.cpu_count() or 1) // jobs)

    runs = expand_sweep(linea, sweep)
    if args.runs:
        runs = [r for r in runs if re.search(args.runs, r["label"])]
        if not runs:
            raise SystemExit("--runs %s matches no run of %s" % (args.runs, sweep))
    sweep_steps = max(int(r["overrides"].get("train.steps", "0")) for r in runs)
    preset_set = list(preset["set"]) + ["device=%s" % args.device, "train.threads=%d" % threads,
                                        "train.resume=never"] + list(args.set or [])
    for r in runs:
        r["overrides"] = merge_overrides(["%s=%s" % kv for kv in r["overrides"].items()], preset_set)
        r.update(describe(r))
    baseline = base_value(sweep, "sweep", "baseline")
    data_path = unquote(runs[0]["overrides"].get("data.path", ""))
    if data_path == "default":
        cache = os.environ.get("LINEA_CACHE") or os.path.join(os.environ.get("HOME", "/"), ".cache/linea")
        corpus = os.path.join(cache, "gcide-spm4096")
        if not os.path.exists(os.path.join(corpus, "tokenizer.model")):
            # Each run would build the corpus at once into the same folder: refuse instead.
            raise SystemExit("the embedded corpus is not in %s (set LINEA_CACHE to the folder that holds "
                             "gcide-spm4096/, or build it first: linea train train.steps=1)" % corpus)

    log("%s: %d runs of %s, budget %d s (evaluation until +%d s), %d at once, %d CPU threads each, device %s; "
        "work in %s, results in %s" % (args.study, len(runs), os.path.relpath(sweep, ROOT), budget,
                                       eval_deadline - start, jobs, threads, args.device, work, out))
    if args.dry_run:
        for r in queue_order(runs, baseline, lambda r: 0):
            print(" ".join(train_argv(linea, r, r["overrides"], os.path.join(work, "runs"), r["label"])))
        return 0
    lock = study_lock(LOCK_FILE, "the %s study writing %s" % (args.study, out))
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(os.path.join(work, "runs"))
    mps = Mps(os.path.join(work, "mps"), log)
    try:
        if args.device != "cuda" or args.no_mps:
            mps.note = "--no-mps" if args.no_mps else "device %s" % args.device
        else:
            mps.start()
        return study(args, preset, start, log, out, work, linea, sweep, runs, baseline, budget, jobs, margin,
                     threads, sweep_steps, preset_set, eval_tasks, eval_limit, eval_lengths, eval_deadline, mps)
    finally:
        mps.stop()
        lock.close()


def study(args, preset, start, log, out, work, linea, sweep, runs, baseline, budget, jobs, margin, threads,
          sweep_steps, preset_set, eval_tasks, eval_limit, eval_lengths, eval_deadline, mps):
    """run_study's probe, plan, training, evaluation and report, inside its lock and MPS daemon."""
    plan = {"study": args.study, "sweep": os.path.relpath(sweep, ROOT), "budget_s": budget, "jobs": jobs,
            "threads": threads, "device": args.device, "margin_s": margin, "sweep_steps": sweep_steps,
            "runs": {}, "baseline": baseline, "eval_tasks": eval_tasks, "eval_lengths": eval_lengths,
            "eval_limit": eval_limit, "git": git_commit(), "gpu": gpu_name(), "linea": linea,
            "extra_overrides": preset_set, "mps": mps.on, "mps_note": mps.note, "replans": []}
    evals = preset["evals_per_run"]
    # A val evaluation: train.eval_batches batches of val_batch_steps steps each.
    eval_steps = int(runs[0]["overrides"].get("train.eval_batches", "8")) * preset["val_batch_steps"]
    cost_at = lambda r, s: run_cost(r, s, evals, eval_steps) if "step_s" in r else 0.0

    # ---- probe ---------------------------------------------------------------------------------------
    def probe_job(r, folder):
        o = dict(r["overrides"])
        o.update({"train.log_every": "1", "train.checkpoint_every": "-1", "train.eval_every": "0",
                  "optimizer.warmup_steps": "1"})
        d = os.path.join(work, folder)
        return Job("%s %s" % (folder, r["label"]), train_argv(linea, r, o, d, r["label"]),
                   os.path.join(d, r["label"] + ".log"), process_env(threads, mps.env),
                   metrics_path=os.path.join(d, r["label"], "metrics.jsonl"))

    if args.steps:
        steps = args.steps
        plan["steps_rule"] = "--steps %d" % steps
        log("steps fixed by --steps: %d (no probe)" % steps)
        live = runs
        for r in live:
            r["steps"] = steps
    else:
        steady_steps = args.probe_steps or preset["probe_steps"]
        probe_deadline = min(start + 0.2 * budget, eval_deadline)
        while True:
            for folder in ("probe", "probe-filler"):
                shutil.rmtree(os.path.join(work, folder), ignore_errors=True)
                os.makedirs(os.path.join(work, folder))
            outcome = probe(queue_order(runs, baseline, lambda r: 0), jobs, probe_deadline, steady_steps,
                            preset["probe_cap"], probe_job, log)
            if outcome is None and mps.on:  # MPS answered but its clients did not run: once without it
                mps.give_up("no run of the probe's first wave logged a step under MPS")
                plan["mps"], plan["mps_note"] = False, mps.note
                continue
            break
        if ABORT["signal"] is not None:
            write_plan(out, plan)
            raise SystemExit("stopped by signal %d during the probe" % ABORT["signal"])
        if outcome is None:
            write_plan(out, plan)
            raise SystemExit("no run of the probe's first wave logged a step before the wave's end (%s/probe/*.log)"
                             % work)
        live = []
        for r in runs:
            state = outcome[r["label"]]
            if state.startswith("failed"):
                plan["runs"][r["label"]] = {"probe_error": state, "probe_log_tail": r.get("probe_log_tail", "")}
                r["failed"] = "probe: " + state
                continue
            live.append(r)
            plan["runs"][r["label"]] = r.get("probe", {"probe_unmeasured": True})
        measured = [r for r in live if outcome[r["label"]] == "ok"]
        if not measured:
            write_plan(out, plan)
            raise SystemExit("no probe run was timed; see the logs above")
        for r in live:
            if outcome[r["label"]] != "ok":  # not timed: costed as the slowest measured run, on the safe side
                r["step_s"] = max(m["step_s"] for m in measured)
                r["overhead_s"] = max(m["overhead_s"] for m in measured)
                log("probe %s: not timed before the probe's deadline; costed as the slowest measured run" %
                    r["label"])
        for r in live:
            r["overhead_s"] += preset["end_s"]
        plan["probe"] = ("each wave %d processes at once for its whole length (fillers in the last); step time "
                         "= median over the steps after every process of the wave passed step 3; fixed cost "
                         "= time to step 3 less 3 steps, + %.0f s for the end" % (jobs, preset["end_s"]))

    # ---- evaluation reserve and the training deadline ------------------------------------------------------
    if not eval_tasks:
        reserve = 0.0
    elif args.eval_reserve is not None:
        reserve = float(args.eval_reserve)
        plan["eval_reserve_rule"] = "--eval-reserve"
    elif args.steps:
        reserve = 100.0
        plan["eval_reserve_rule"] = "--steps: no probe to size it from, 100 s"
    else:
        # Evaluations start once every training has started, at most --jobs processes in all; at worst
        # every run's evaluation is still to do then: ceil(runs / jobs) evaluations one after another in
        # a slot, each costing its fixed cost and eval_steps_per_batch steps per task and generate batch.
        task_batches = eval_task_count(eval_tasks) * math.ceil(eval_limit / 8)
        eval_s = max(r["overhead_s"] + task_batches * preset["eval_steps_per_batch"] * r["step_s"] for r in live)
        per_slot = math.ceil(len(live) / jobs)
        reserve = min(per_slot * eval_s, 0.4 * budget)
        plan["eval_estimate_s"] = round(eval_s, 1)
        plan["eval_reserve_rule"] = ("%d evaluations a slot x %.0f s (fixed cost + %d task batches x %d steps), "
                                     "at most 0.4 x the budget" % (per_slot, eval_s, task_batches,
                                                                    preset["eval_steps_per_batch"]))
    train_deadline = eval_deadline - reserve
    plan["eval_reserve_s"] = round(reserve, 1)
    plan["train_deadline_s"] = round(train_deadline - start, 1)
    if eval_tasks:
        log("evaluation: %s at %s, %d samples a task; %.0f s kept for it (%s): training until +%.0f s" % (
            eval_tasks, eval_lengths, eval_limit, reserve, plan.get("eval_reserve_rule"), train_deadline - start))

    # ---- steps ---------------------------------------------------------------------------------------------
    order = queue_order(live, baseline, lambda r: cost_at(r, sweep_steps))
    if not args.steps:
        share = preset["plan_share"]
        window = share * (train_deadline - now() - 2.0)
        steps, span, rule = plan_steps(order, jobs, window, preset["min_steps"], sweep_steps, evals, eval_steps)
        slow = [r for r in live if r["steps"] != steps]
        if slow:
            log("slow runs (> 2.5x the median step time) get fewer steps so that the rest train longer: %s" %
                ", ".join("%s %d" % (r["label"], r["steps"]) for r in slow))
        plan["steps_rule"] = ("largest S in [%d, %d] with the makespan of the queue order over %d slots <= %.1f x "
                              "%.0f s left for training; %s" % (preset["min_steps"], sweep_steps, jobs, share,
                                                                train_deadline - now(), rule))
        plan["projected_makespan_s"] = round(span, 1)
        log("steps: %d (projected training %.0f s, %.0f%% of the %.0f s left; the sweep file says %d)" %
            (steps, span, 100 * share, train_deadline - now(), sweep_steps))
        if span > window:
            log("WARNING: even %d steps do not fit %.0f%% of the time left; the re-plan lowers the steps of "
                "runs not started, and the deadline stops what is still going" % (steps, 100 * share))
    plan["steps"] = steps
    plan["queue_order"] = [r["label"] for r in order]

    # ---- train, then evaluate ---------------------------------------------------------------------------
    eval_queue = []
    runs_out = os.path.join(out, "runs")
    os.makedirs(runs_out, exist_ok=True)

    def train_done(job):
        r = job.run
        run_dir = os.path.join(work, "runs", r["label"])
        r["train_rc"], r["stopped"] = job.rc, job.stopped
        r["train_wall_s"] = None if job.started is None else round((job.ended or now()) - job.started, 1)
        r["steps_done"] = last_step(os.path.join(run_dir, "metrics.jsonl"))
        save_run(r, run_dir, job.log_path, os.path.join(runs_out, r["label"]), plan)
        if eval_tasks and job.rc != "not run" and has_checkpoint(run_dir):
            argv = [linea, "eval", run_dir, "--tasks", eval_tasks, "--lengths", eval_lengths, "--limit",
                    str(eval_limit), "--device", args.device, "--out", os.path.join(run_dir, "eval.jsonl")]
            e = Job("eval " + r["label"], argv, os.path.join(run_dir, "eval.log"), process_env(threads, mps.env),
                    on_end=eval_done)
            e.run = r
            eval_queue.append(e)

    def eval_done(job):
        r = job.run
        r["eval_rc"] = job.rc
        r["eval_wall_s"] = None if job.started is None else round((job.ended or now()) - job.started, 1)
        run_dir = os.path.join(work, "runs", r["label"])
        save_run(r, run_dir, os.path.join(work, "runs", r["label"] + ".train.log"),
                 os.path.join(runs_out, r["label"]), plan)

    def configure(job):
        """The run's overrides and command for its (current) steps: warm-up keeps the sweep's ratio."""
        r = job.run
        o = dict(r["sweep_overrides"])
        warm = int(o.get("optimizer.warmup_steps", "0"))
        if warm:
            o["optimizer.warmup_steps"] = str(max(1, round(r["steps"] * warm / int(o.get("train.steps", r["steps"])))))
        o["train.steps"] = str(r["steps"])
        o["train.eval_every"] = str(max(1, r["steps"] // evals))
        r["overrides"] = o
        job.argv = train_argv(linea, r, o, os.path.join(work, "runs"), r["label"])

    train_jobs = []
    for r in order:
        r["sweep_overrides"] = dict(r["overrides"])
        j = Job("train " + r["label"], None, os.path.join(work, "runs", r["label"] + ".train.log"),
                process_env(threads, mps.env), on_end=train_done,
                metrics_path=os.path.join(work, "runs", r["label"], "metrics.jsonl"))
        j.run = r
        configure(j)
        train_jobs.append(j)
    for r in runs:
        if r.get("failed"):
            save_run(r, None, None, os.path.join(runs_out, r["label"]), plan)

    def status(running, evaluating):
        parts = ["%s %d/%d" % (j.run["label"], last_step(j.metrics_path), j.run["steps"]) for j in running]
        parts += ["eval %s" % j.run["label"] for j in evaluating]
        log("running: " + ", ".join(parts))

    def replan(running, queue):
        """When the running runs go over 10% slower than probed, fewer steps for the runs not started, so
        that they still end within 0.8 x the time left (replan_steps)."""
        t = now()
        ratios, free = [], []
        for j in running:
            r = j.run
            step_s, done = observed_step_s(read_metrics(j.metrics_path), r["steps"])
            if step_s is None:  # not two log lines yet: its probed cost
                free.append(max(0.0, cost_at(r, r["steps"]) - (t - j.started)))
                continue
            ratios.append(step_s / r["step_s"])
            evals_left = evals - evals * done // r["steps"]
            free.append((r["steps"] - done + evals_left * eval_steps) * step_s + preset["end_s"])
        free += [0.0] * (jobs - len(running))
        if not ratios or len(ratios) < len(running) / 2:
            return
        k = statistics.median(ratios)
        if k <= 1.1:
            return
        queued = [j.run for j in queue]
        new = replan_steps(free, queued, k, 0.8 * (train_deadline - t), preset["min_steps"], evals, eval_steps)
        lower = [j for j in queue if j.run["steps"] > new]
        if not lower:
            return
        before = sorted({j.run["steps"] for j in lower})
        for j in lower:
            j.run["steps"] = new
            configure(j)
        plan["replans"].append({"at_s": round(t - start, 1), "slower_than_probed": round(k, 2), "steps": new,
                                "runs": [j.run["label"] for j in lower]})
        log("re-plan: the running runs take %.2fx their probed step time; the %d runs not started get %d steps "
            "(were %s): %s" % (k, len(lower), new, "/".join(map(str, before)),
                               ", ".join(j.run["label"] for j in lower)))

    log("training %d runs, %d at once, in this order (baseline first, then one run of every mixer): %s" %
        (len(train_jobs), jobs, ", ".join("%s %d" % (j.run["label"], j.run["steps"]) for j in train_jobs)))
    run_pool(train_jobs, jobs, train_deadline, log, status=status,
             extra=(eval_queue, eval_deadline) if eval_tasks else None,
             tick=None if args.steps else replan)
    plan["steps_per_run"] = {r["label"]: r["steps"] for r in live}
    plan["wall_s"] = round(now() - start, 1)
    write_plan(out, plan)
    report(out, log)
    if not args.keep_runs_dir:
        pack_runs(out)
        log("runs/ packed into %s/runs.tar.gz (scripts/recall-study.sh report unpacks it)" % out)
    log("done in %.0f s of the %d s budget" % (now() - start, budget))
    return 0


def pack_runs(out):
    runs_dir = os.path.join(out, "runs")
    with tarfile.open(os.path.join(out, "runs.tar.gz.tmp"), "w:gz") as tar:
        tar.add(runs_dir, arcname="runs")
    os.replace(os.path.join(out, "runs.tar.gz.tmp"), os.path.join(out, "runs.tar.gz"))
    shutil.rmtree(runs_dir)


def has_checkpoint(run_dir):
    d = os.path.join(run_dir, "checkpoints")
    return os.path.isdir(d) and any(os.path.exists(os.path.join(d, c, "COMMITTED")) for c in os.listdir(d))


def save_run(r, run_dir, train_log, dest, plan):
    """The run's small files into OUT/runs/LABEL/ (no checkpoints), and its record run.json."""
    os.makedirs(dest, exist_ok=True)
    if run_dir:
        for name in ("config.toml", "metrics.jsonl", "eval.jsonl", "eval.log"):
            src = os.path.join(run_dir, name)
            if os.path.exists(src):
                shutil.copyfile(src, os.path.join(dest, name))
    if train_log and os.path.exists(train_log):
        shutil.copyfile(train_log, os.path.join(dest, "train.log"))
    record = {k: r.get(k) for k in ("label", "mixer", "hybrid", "d_model", "layers", "attention_layers",
                                     "attention_share", "step_s", "overhead_s", "train_rc", "stopped",
                                     "train_wall_s", "steps_done", "eval_rc", "eval_wall_s", "failed")}
    record["steps_planned"] = r.get("steps", plan.get("steps"))
    record["base"] = os.path.relpath(r["base"], ROOT)
    record["overrides"] = r["overrides"]
    with open(os.path.join(dest, "run.json"), "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)


def write_plan(out, plan):
    with open(os.path.join(out, "study.json"), "w") as f:
        json.dump(plan, f, indent=1, sort_keys=True)


def read_tail(path, lines=8):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return ""


def gpu_name():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# ---- report: tables and plot ---------------------------------------------------------------------------

EVAL_LINE = re.compile(r"^(\S+) @(\d+) \((\d+)\): (.*)$")
EVAL_METRIC = re.compile(r"(\S+) (\S+) ± (\S+)")
# What the report reads of each task: RULER's score or mqar's acc, and the teacher-forced answer_nll
# (nats per answer token) and answer_greedy that linea eval reports beside them.
EVAL_METRICS = ("score", "acc", "answer_nll", "answer_greedy")


def read_eval(run_dir):
    """{task@length: {metric: (value, stderr, samples)}} from eval.jsonl, else eval.log's printed lines."""
    results = {}
    for row in read_metrics(os.path.join(run_dir, "eval.jsonl")):
        key = "%s@%s" % (row["task"], row.get("context_length", ""))
        for metric in EVAL_METRICS:
            if metric in row:
                results.setdefault(key, {})[metric] = (row[metric], row.get(metric + "_stderr"), row.get("samples"))
    if results:
        return results, "eval.jsonl"
    try:
        with open(os.path.join(run_dir, "eval.log"), errors="replace") as f:
            for line in f:
                m = EVAL_LINE.match(line.strip())
                if m:
                    task, length, n, rest = m.groups()
                    for metric, value, err in EVAL_METRIC.findall(rest):
                        if metric in EVAL_METRICS:
                            results.setdefault("%s@%s" % (task, length), {})[metric] = (float(value), float(err),
                                                                                        int(n))
    except OSError:
        pass
    return results, "eval.log" if results else None


RULER_PREFIXES = ("niah_", "vt", "cwe", "fwe", "qa_")


def collect(out):
    rows = []
    runs_dir = os.path.join(out, "runs")
    packed = os.path.join(out, "runs.tar.gz")
    if not os.path.isdir(runs_dir) and os.path.exists(packed):
        with tarfile.open(packed) as tar:  # written by pack_runs: members runs/LABEL/FILE only
            members = [m for m in tar.getmembers() if m.name.startswith("runs/") and ".." not in m.name]
            tar.extractall(out, members=members)
    for label in sorted(os.listdir(runs_dir)) if os.path.isdir(runs_dir) else []:
        d = os.path.join(runs_dir, label)
        try:
            with open(os.path.join(d, "run.json")) as f:
                rec = json.load(f)
        except (OSError, ValueError):
            continue
        metrics = read_metrics(os.path.join(d, "metrics.jsonl"))
        val = [m for m in metrics if "val_loss" in m]
        rec["steps_done"] = metrics[-1]["step"] if metrics else 0
        done = re.findall(r"(?:done|stopped): steps \d+ → (\d+)", read_tail(os.path.join(d, "train.log"), 20))
        if done:
            rec["steps_done"] = int(done[-1])
        rec["tokens"] = metrics[-1].get("tokens") if metrics else None
        rec["final_loss"] = metrics[-1].get("loss") if metrics else None
        rec["val_loss"] = val[-1]["val_loss"] if val else None
        rec["val_step"] = val[-1]["step"] if val else None
        rec["val_acc"] = val[-1].get("val_acc") if val else None
        rec["tokens_per_s"] = statistics.median([m["tokens_per_s"] for m in metrics if "tokens_per_s" in m]) \
            if metrics else None
        ev, source = read_eval(d)
        rec["eval"] = {k: {m: {"value": v[0], "stderr": v[1], "samples": v[2]} for m, v in ms.items()}
                       for k, ms in ev.items()}
        rec["eval_source"] = source
        rec["ruler_scores"] = {k: ms["score"][0] for k, ms in ev.items() if k.startswith(RULER_PREFIXES) and "score" in ms}
        rec["ruler_nlls"] = {k: ms["answer_nll"][0] for k, ms in ev.items()
                             if k.startswith(RULER_PREFIXES) and "answer_nll" in ms}
        mqar = [ms["acc"][0] for k, ms in ev.items() if k.startswith("mqar@") and "acc" in ms]
        rec["eval_mqar_acc"] = mqar[0] if mqar else None
        rows.append(rec)
    # The means (RULER's score, the answers' NLL) are taken over the tasks that every evaluated run
    # finished, so that an evaluation cut by the deadline does not compare means over different tasks.
    for per_task, tasks, mean in (("ruler_scores", "ruler_tasks", "ruler_mean"),
                                  ("ruler_nlls", "ruler_nll_tasks", "ruler_nll_mean")):
        scored = [r[per_task] for r in rows if r[per_task]]
        common = sorted(set.intersection(*[set(d) for d in scored])) if scored else []
        for r in rows:
            r[tasks] = ",".join(common)
            r[mean] = sum(r[per_task][k] for k in common) / len(common) if common and r[per_task] else None
    return rows


def fmt(v, digits=3):
    if v is None:
        return "—"
    if isinstance(v, float):
        return ("%." + str(digits) + "f") % v
    return str(v)


def status_of(r):
    if r.get("failed"):
        return r["failed"]
    if r.get("train_rc") == "not run":
        return "not run (deadline)"
    s = "stopped at deadline" if r.get("stopped") else ("ok" if r.get("train_rc") == 0 else "exit %s" % r.get("train_rc"))
    if r.get("eval_rc") not in (None, 0):
        s += ", eval %s" % ("killed at deadline" if r.get("eval_rc") == -9 else "exit %s" % r.get("eval_rc"))
    return s


def report(out, log=print):
    rows = collect(out)
    try:
        with open(os.path.join(out, "study.json")) as f:
            plan = json.load(f)
    except (OSError, ValueError):
        plan = {}
    study = plan.get("study") or ("recall" if any(r.get("eval") for r in rows) else "mqar")
    task_keys = sorted({k for r in rows for k in r["eval"]})
    # TSV and JSON: every figure of every run.
    cols = ["label", "mixer", "hybrid", "d_model", "layers", "attention_layers", "attention_share", "steps_planned",
            "steps_done", "tokens", "final_loss", "val_loss", "val_step", "val_acc", "tokens_per_s", "ruler_tasks",
            "ruler_mean", "eval_mqar_acc", "status"]
    with open(os.path.join(out, "results.tsv"), "w") as f:
        f.write("\t".join(cols + task_keys) + "\n")
        for r in rows:
            r["status"] = status_of(r)
            vals = [fmt(r.get(c), 5) for c in cols]
            for k in task_keys:
                m = r["eval"].get(k, {})
                v = m.get("score") or m.get("acc")
                vals.append(fmt(v["value"], 4) if v else "—")
            f.write("\t".join(vals) + "\n")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"study": study, "plan": plan, "runs": rows}, f, indent=1, sort_keys=True)
    md = mqar_markdown(rows, plan) if study == "mqar" else recall_markdown(rows, plan, task_keys)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(md)
    svg = mqar_svg(rows, plan) if study == "mqar" else recall_svg(rows, plan)
    with open(os.path.join(out, "plot.svg"), "w") as f:
        f.write(svg)
    log("report: %d runs -> %s/results.{tsv,json,md}, plot.svg" % (len(rows), out))
    return 0


def header_line(plan):
    bits = []
    if plan.get("gpu"):
        bits.append(plan["gpu"])
    if plan.get("steps"):
        bits.append("%s steps a run (%s)" % (plan["steps"], plan.get("steps_rule", "")))
    if plan.get("budget_s"):
        bits.append("budget %s s, %s runs at once, wall %s s" % (plan["budget_s"], plan.get("jobs"), plan.get("wall_s")))
    if plan.get("git"):
        bits.append("linea %s" % plan["git"])
    return "; ".join(bits)


def mqar_markdown(rows, plan):
    widths = sorted({r["d_model"] for r in rows})
    mixers = [m for m in MIXERS if any(r["mixer"] == m for r in rows)]
    lines = ["MQAR val_acc (share of queries whose argmax is the value) by mixer and d_model, 2 layers, "
             "seq 256, 16 pairs, vocabulary 8192: the last evaluation of each run (step in brackets when "
             "it is not the last planned step). %s." % header_line(plan), "",
             "| mixer | " + " | ".join("d %d" % w for w in widths) + " |",
             "|---|" + "---|" * len(widths)]
    for m in mixers:
        cells = []
        for w in widths:
            r = next((r for r in rows if r["mixer"] == m and r["d_model"] == w), None)
            if r is None or r.get("val_acc") is None:
                cells.append("— (%s)" % status_of(r) if r else "—")
            else:
                c = "%.3f" % r["val_acc"]
                if r.get("val_step") != r.get("steps_planned"):
                    c += " (step %s)" % r.get("val_step")
                cells.append(c)
        lines.append("| %s | %s |" % (m, " | ".join(cells)))
    return "\n".join(lines) + "\n"


def lr_of(run):
    """The learning rate a run trained with (its optimizer.lr override), or None."""
    value = (run.get("overrides") or {}).get("optimizer.lr")
    try:
        return float(unquote(value)) if value else None
    except ValueError:
        return None


def best_of(dirs, out, log=print):
    """MQAR studies of one sweep at different learning rates (each one call of `mqar --set
    optimizer.lr=LR`): each mixer and width's best last val_acc over them and the lr that gave it, as
    Zoology and the DeltaNet paper report MQAR (the best of an lr sweep per point), and every lr's
    figure beside it. Writes OUT/best.md and OUT/best.json."""
    rows, plans = [], []
    for d in dirs:
        try:
            with open(os.path.join(d, "study.json")) as f:
                plan = json.load(f)
        except (OSError, ValueError):
            plan = {}
        if plan.get("study", "mqar") != "mqar":
            raise SystemExit("best: %s holds a %s study; best compares MQAR studies" % (d, plan.get("study")))
        found = collect(d)
        if not found:
            raise SystemExit("best: %s has no runs (runs/ or runs.tar.gz)" % d)
        for r in found:
            r["lr"] = lr_of(r)
            r["study_dir"] = d
        rows += found
        plans.append(plan)
    scored = [r for r in rows if r.get("val_acc") is not None and r["lr"] is not None]
    lrs = sorted({r["lr"] for r in scored})
    widths = sorted({r["d_model"] for r in rows})
    mixers = [m for m in MIXERS if any(r["mixer"] == m for r in rows)]
    best = {}
    for r in scored:  # the highest val_acc; of equal ones, the lowest lr
        key = (r["mixer"], r["d_model"])
        if key not in best or (r["val_acc"], -r["lr"]) > (best[key]["val_acc"], -best[key]["lr"]):
            best[key] = r
    steps = sorted({r.get("steps_planned") for r in rows if r.get("steps_planned")})
    lines = ["MQAR val_acc, the best over learning rates %s of each mixer and d_model (its lr in brackets): "
             "%d studies, %s steps a run; %s." % (", ".join("%g" % lr for lr in lrs), len(dirs),
                                                 "/".join(str(x) for x in steps) or "?",
                                                 "; ".join(header_line(p) for p in plans if p) or "no plans"),
             "", "| mixer | " + " | ".join("d %d" % w for w in widths) + " |", "|---|" + "---|" * len(widths)]
    for m in mixers:
        cells = []
        for w in widths:
            r = best.get((m, w))
            cells.append("%.3f (lr %g)" % (r["val_acc"], r["lr"]) if r else "—")
        lines.append("| %s | %s |" % (m, " | ".join(cells)))
    lines += ["", "Every learning rate:", "", "| mixer | lr | " + " | ".join("d %d" % w for w in widths) + " |",
              "|---|---|" + "---|" * len(widths)]
    for m in mixers:
        for lr in lrs:
            cells = []
            for w in widths:
                r = next((r for r in scored if r["mixer"] == m and r["d_model"] == w and r["lr"] == lr), None)
                cells.append("%.3f" % r["val_acc"] if r else "—")
            lines.append("| %s | %g | %s |" % (m, lr, " | ".join(cells)))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "best.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "best.json"), "w") as f:
        json.dump({"studies": dirs, "lrs": lrs,
                   "best": [{"mixer": m, "d_model": w, "val_acc": r["val_acc"], "lr": r["lr"], "label": r["label"],
                             "study_dir": r["study_dir"]} for (m, w), r in sorted(best.items())]},
                  f, indent=1, sort_keys=True)
    log("best: %d runs of %d studies, lrs %s -> %s/best.{md,json}" % (len(rows), len(dirs), lrs, out))
    return 0


def ratio_table(rows, mixers, key, digits):
    """Markdown rows: each mixer's `key` at pure and 3:1, their difference and the Transformer's."""
    tf = next((r for r in rows if r["mixer"] == "attention"), None)
    pick = lambda m, pure: next((r for r in rows if r["mixer"] == m and (r["hybrid"] == "pure") == pure), None)
    tv = tf.get(key) if tf else None
    lines = ["| mixer | pure | 3:1 | 3:1 − pure | Transformer |", "|---|---|---|---|---|"]
    for m in mixers:
        pv, hv = (pick(m, True) or {}).get(key), (pick(m, False) or {}).get(key)
        diff = "%+.*f" % (digits, hv - pv) if pv is not None and hv is not None else "—"
        lines.append("| %s | %s | %s | %s | %s |" % (m, fmt(pv, digits), fmt(hv, digits), diff, fmt(tv, digits)))
    return lines


def recall_markdown(rows, plan, task_keys):
    mixers = [m for m in MIXERS if m != "attention" and any(r["mixer"] == m for r in rows)]
    tf = next((r for r in rows if r["mixer"] == "attention"), None)
    lengths = plan.get("eval_lengths", "")
    common = next((r["ruler_tasks"] for r in rows if r.get("ruler_tasks")), "")
    nll_common = next((r["ruler_nll_tasks"] for r in rows if r.get("ruler_nll_tasks")), "")
    lines = ["Recall against the linear:full ratio: the mean RULER score (%%, the mean over the %d RULER tasks "
             "that every evaluated run finished, at context %s: %s) of each mixer's pure and 3:1 models and of "
             "the Transformer. %s." % (len(common.split(",")) if common else 0, lengths or "as evaluated",
                                       common.replace(",", ", ") or "none", header_line(plan)), ""]
    lines += ratio_table(rows, mixers, "ruler_mean", 1)
    lines += ["", "The same runs by the teacher-forced negative log-likelihood of the right answer (nats per "
              "answer token, lower is better recall; linea eval's answer_nll, the mean over the %d RULER tasks "
              "every evaluated run has it for: %s): it moves where greedy answers are all still wrong." %
              (len(nll_common.split(",")) if nll_common else 0, nll_common.replace(",", ", ") or "none"), ""]
    lines += ratio_table(rows, mixers, "ruler_nll_mean", 3)
    pick = lambda m, pure: next((r for r in rows if r["mixer"] == m and (r["hybrid"] == "pure") == pure), None)
    lines += ["", "Every run: attention layers of all layers, steps trained, final val_loss (language "
              "modelling), mean RULER score, mean answer NLL, the `mqar` eval task's acc (over the tokenizer's "
              "words), status.", "",
              "| run | attention layers | steps | val_loss | RULER mean | answer NLL | mqar acc | status |",
              "|---|---|---|---|---|---|---|---|"]
    order = ([tf] if tf else []) + [r for m in mixers for r in (pick(m, True), pick(m, False)) if r]
    for r in order:
        lines.append("| %s | %s/%s | %s | %s | %s | %s | %s | %s |" % (
            r["label"], r.get("attention_layers"), r.get("layers"), r.get("steps_done"), fmt(r.get("val_loss"), 3),
            fmt(r.get("ruler_mean"), 1), fmt(r.get("ruler_nll_mean"), 3), fmt(r.get("eval_mqar_acc"), 3),
            status_of(r)))
    lines += ["", "Per task (score %; mqar: acc):", "",
              "| run | " + " | ".join(task_keys) + " |", "|---|" + "---|" * len(task_keys)]
    for r in order:
        cells = []
        for k in task_keys:
            m = r["eval"].get(k, {})
            v = m.get("score") or m.get("acc")
            cells.append(fmt(v["value"], 1 if "score" in m else 3) if v else "—")
        lines.append("| %s | %s |" % (r["label"], " | ".join(cells)))
    lines += ["", "For comparison, seed 001's claim: " + SEED001_CLAIM, ""]
    return "\n".join(lines)


# ---- SVG ------------------------------------------------------------------------------------------------

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#000000"]


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def panel(x0, y0, w, h, title, xlabels, series, ylabel, ymin, ymax, hline=None):
    """One line chart: xlabels are categories, series = [(name, color, [y or None per x], dashed)]."""
    parts = ['<text x="%.1f" y="%.1f" font-size="13" text-anchor="middle">%s</text>' % (x0 + w / 2, y0 - 8, esc(title))]
    parts.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#444"/>' % (x0, y0, w, h))
    if ymax <= ymin:
        ymax = ymin + 1
    ys = lambda v: y0 + h - (v - ymin) / (ymax - ymin) * h
    n = len(xlabels)
    xs = lambda i: x0 + (i + 0.5) * w / n
    for k in range(6):
        v = ymin + (ymax - ymin) * k / 5
        parts.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>' % (x0, ys(v), x0 + w, ys(v)))
        parts.append('<text x="%.1f" y="%.1f" font-size="10" text-anchor="end">%s</text>' % (x0 - 4, ys(v) + 3, "%.3g" % v))
    for i, lab in enumerate(xlabels):
        parts.append('<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle">%s</text>' % (xs(i), y0 + h + 14, esc(lab)))
    parts.append('<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>' %
                 (x0 - 36, y0 + h / 2, x0 - 36, y0 + h / 2, esc(ylabel)))
    if hline is not None:
        name, color, v = hline
        parts.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="5,4"/>' %
                     (x0, ys(v), x0 + w, ys(v), color))
    for name, color, values, dashed in series:
        pts = [(xs(i), ys(v)) for i, v in enumerate(values) if v is not None]
        if len(pts) > 1:
            parts.append('<polyline fill="none" stroke="%s" stroke-width="1.8"%s points="%s"/>' %
                         (color, ' stroke-dasharray="4,3"' if dashed else "", " ".join("%.1f,%.1f" % p for p in pts)))
        for x, y in pts:
            parts.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s</title></circle>' % (x, y, color, esc(name)))
    return parts


def legend(x0, y0, names_colors):
    parts = []
    for i, (name, color) in enumerate(names_colors):
        y = y0 + 15 * i
        parts.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>' % (x0, y, x0 + 18, y, color))
        parts.append('<text x="%.1f" y="%.1f" font-size="11">%s</text>' % (x0 + 22, y + 4, esc(name)))
    return parts


def svg_doc(width, height, title, parts, note):
    head = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">' % (width, height),
            '<rect width="100%" height="100%" fill="white"/>',
            '<text x="%d" y="20" font-size="15" text-anchor="middle">%s</text>' % (width / 2, esc(title)),
            '<text x="%d" y="%d" font-size="10" text-anchor="middle" fill="#555">%s</text>' % (width / 2, height - 8, esc(note))]
    return "\n".join(head + parts + ["</svg>"]) + "\n"


def mqar_svg(rows, plan):
    widths = sorted({r["d_model"] for r in rows})
    mixers = [m for m in MIXERS if any(r["mixer"] == m for r in rows)]
    series = []
    for i, m in enumerate(mixers):
        vals = []
        for w in widths:
            r = next((r for r in rows if r["mixer"] == m and r["d_model"] == w), None)
            vals.append(r.get("val_acc") if r else None)
        series.append((m, PALETTE[i % len(PALETTE)], vals, False))
    parts = panel(70, 50, 520, 330, "MQAR accuracy by model width (2 layers, seq 256, 16 pairs)",
                  ["d_model %d" % w for w in widths], series, "val_acc", 0.0, 1.0)
    parts += legend(615, 60, [(s[0], s[1]) for s in series])
    return svg_doc(760, 430, "MQAR: mixers x width", parts, header_line(plan))


def recall_svg(rows, plan):
    mixers = [m for m in MIXERS if m != "attention" and any(r["mixer"] == m for r in rows)]
    tf = next((r for r in rows if r["mixer"] == "attention"), None)
    xl = ["pure (0 attn)", "3:1 (1/4 attn)", "Transformer"]
    parts = []
    names = []
    for k, (key, ylabel, title, lo, hi) in enumerate([
            ("ruler_mean", "mean RULER score (%)", "Recall (RULER, context %s)" % plan.get("eval_lengths", "?"), 0.0,
             None),
            ("ruler_nll_mean", "answer NLL (nats/token)", "Recall (teacher-forced answer NLL)", None, None),
            ("val_loss", "val_loss", "Language modelling (final val_loss)", None, None)]):
        series = []
        allv = []
        for i, m in enumerate(mixers):
            pure = next((r for r in rows if r["mixer"] == m and r["hybrid"] == "pure"), None)
            hyb = next((r for r in rows if r["mixer"] == m and r["hybrid"] != "pure"), None)
            vals = [pure.get(key) if pure else None, hyb.get(key) if hyb else None, None]
            allv += [v for v in vals if v is not None]
            series.append((m, PALETTE[i % len(PALETTE)], vals, False))
        tv = tf.get(key) if tf else None
        if tv is not None:
            allv.append(tv)
            series.append(("transformer", "#000000", [None, None, tv], False))
        ymin = lo if lo is not None else (min(allv) if allv else 0.0)
        ymax = hi if hi is not None else (max(allv) if allv else 1.0)
        if key == "ruler_mean":
            ymax = max(10.0, math.ceil((ymax if allv else 0) / 10.0) * 10)
        else:
            pad = 0.05 * (ymax - ymin) or 0.1
            ymin, ymax = ymin - pad, ymax + pad
        parts += panel(70 + k * 400, 50, 320, 300, title, xl, series, ylabel, ymin, ymax,
                       hline=("transformer", "#000000", tv) if tv is not None else None)
        names = [(s[0], s[1]) for s in series]
    parts += legend(1220, 60, names)
    return svg_doc(1360, 400, "Recall against the linear:full ratio (reduced scale)", parts, header_line(plan))


# ---- command line ---------------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(prog="scripts/recall-study.sh", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("study", choices=["mqar", "recall", "report", "best", "selftest"])
    p.add_argument("dirs", nargs="*", metavar="DIR", help="report: the study's output folder; best: the output "
                   "folders of MQAR studies at different lrs")
    p.add_argument("--linea", default=os.path.join(ROOT, "build", "linea"), help="the linea binary")
    p.add_argument("--out", help="results folder (small files only)")
    p.add_argument("--work", help="runs and checkpoints (default /tmp/linea-recall-study/STUDY; emptied first)")
    p.add_argument("--budget", type=int, help="wall seconds from start to the last file (preset: 360)")
    p.add_argument("--jobs", type=int, help="trainings (and evaluations) at once (preset: 11)")
    p.add_argument("--steps", type=int, help="steps of every run, instead of the probe's choice")
    p.add_argument("--probe-steps", type=int, help="steady-state steps each probe run logs (preset 10 mqar, 6 recall)")
    p.add_argument("--margin", type=int, help="seconds kept for the report at the end (preset 20)")
    p.add_argument("--eval-reserve", type=int, help="recall: seconds between the training and evaluation deadlines "
                   "(preset: sized from the probe)")
    p.add_argument("--eval-limit", type=int, help="recall: samples per eval task (preset 8)")
    p.add_argument("--eval-lengths", help="recall: RULER context lengths (preset 1024)")
    p.add_argument("--eval-tasks", help="recall: linea eval's task list (preset niah_single,niah_multikey_1,mqar)")
    p.add_argument("--no-mps", action="store_true", help="do not start a CUDA MPS daemon for the study")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu", "auto"])
    p.add_argument("--runs", help="only the runs whose label matches this regex")
    p.add_argument("--set", action="append", help="KEY=VALUE override for every run (repeatable)")
    p.add_argument("--sweep", help="another sweep file (relative to the repository)")
    p.add_argument("--dry-run", action="store_true", help="print the linea train commands and stop")
    p.add_argument("--keep-runs-dir", action="store_true", help="leave OUT/runs/ as a folder (default: packed "
                   "into OUT/runs.tar.gz at the end)")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.study == "selftest":
        return selftest()
    if args.study == "report":
        if len(args.dirs) != 1:
            p.error("report needs the output folder")
        return report(os.path.abspath(args.dirs[0]))
    if args.study == "best":
        if not args.dirs or not args.out:
            p.error("best needs the studies' output folders and --out")
        return best_of([os.path.abspath(d) for d in args.dirs], os.path.abspath(args.out))
    if not args.out:
        p.error("--out is required")
    return run_study(args)


if __name__ == "__main__":
    sys.exit(main())
