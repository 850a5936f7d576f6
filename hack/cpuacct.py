#!/usr/bin/env python3
"""Where a run's CPU went, by kind of process: Linux process accounting
(acct(2), the kernel's BSD accounting, v3 records: one 64-byte record with
the process's own user+system CPU at every process exit) plus a snapshot of
the processes alive at the start and at the end (the OpenStack stack's
daemons run through a whole stage and never exit inside it), plus a light
sampler (a listing of /proc every 0.25 s) that keeps the command line of
every process it sees, so that a compile is told apart as -race, fuzz
instrumented or plain (its own flags, or else its go command's).

  hack/cpuacct.py start DIR     accounting on, into DIR (root: CAP_SYS_PACCT)
  hack/cpuacct.py stop DIR      accounting off, the end snapshot
  hack/cpuacct.py report DIR [--root PID] [--top N]
                                CPU-seconds by kind and share; with --root,
                                only PID's descendants (and the OpenStack
                                stack), for a machine shared with other work

Where the kernel has no process accounting (or no permission), start says
so and exits 3; .ci/run then leaves the table out. Only one accounting file
is active per machine: a second start moves it.
"""
import ctypes
import os
import signal
import struct
import sys
import time

CLK = os.sysconf("SC_CLK_TCK")
AHZ = 100  # acct v3's comp_t unit: ticks of 1/100 s


def boot_time():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return int(line.split()[1])
    return 0


def cpu_ticks():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    total = sum(v[:8])
    return total - v[3] - v[4], total


def read_proc(pid):
    """(starttime s since boot, ppid, comm, cpu s, cmdline) or None."""
    try:
        with open("/proc/%s/stat" % pid, "rb") as f:
            s = f.read().decode("utf-8", "replace")
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            cmd = f.read(600).replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return None
    lp, rp = s.find("("), s.rfind(")")
    comm = s[lp + 1:rp]
    rest = s[rp + 2:].split()
    ppid = int(rest[1])
    cpu = (int(rest[11]) + int(rest[12])) / CLK
    start = int(rest[19]) / CLK
    return start, ppid, comm, cpu, cmd


def clean(s):
    return s.replace("\t", " ").replace("\n", " ")


def snapshot(path):
    with open(path, "w") as out:
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            p = read_proc(name)
            if p:
                out.write("%s\t%.2f\t%d\t%s\t%.2f\t%s\n" % (name, p[0], p[1], clean(p[2]), p[3], clean(p[4])))


def sample(d):
    """Runs until SIGTERM: writes each new process's line to procs.tsv."""
    seen = set()
    shells = {}  # pid -> comm of the shells seen: a shell that execs (bash -c's last command) is seen again
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    with open(os.path.join(d, "procs.tsv"), "a", buffering=1) as out:
        while not stop:
            now = set(n for n in os.listdir("/proc") if n.isdigit())
            for name in list(shells):
                if name not in now:
                    del shells[name]
                    continue
                try:
                    with open("/proc/%s/comm" % name) as f:
                        comm = f.read().strip()
                except OSError:
                    continue
                if comm != shells[name]:
                    del shells[name]
                    seen.discard(name)
            for name in now - seen:
                p = read_proc(name)
                if p:
                    out.write("%s\t%.2f\t%d\t%s\t%.2f\t%s\n" % (name, p[0], p[1], clean(p[2]), p[3], clean(p[4])))
                    if p[2] in ("bash", "sh", "make", "env", "nice", "setsid", "flock"):
                        shells[name] = p[2]
            seen = now
            time.sleep(0.25)


def libc_acct(path):
    libc = ctypes.CDLL(None, use_errno=True)
    arg = None if path is None else path.encode()
    if libc.acct(arg) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def start(d):
    os.makedirs(d, exist_ok=True)
    acct = os.path.join(d, "acct")
    open(acct, "wb").close()
    try:
        libc_acct(acct)
    except OSError as e:
        print("cpuacct: no process accounting here (%s): no CPU table" % e, file=sys.stderr)
        sys.exit(3)
    busy, total = cpu_ticks()
    with open(os.path.join(d, "meta"), "w") as f:
        f.write("%d %d %d %d\n" % (boot_time(), busy, total, time.time()))
    snapshot(os.path.join(d, "start.tsv"))
    pid = os.fork()
    if pid == 0:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        # Not a file descriptor of the caller's kept open (a pipe to tee).
        os.closerange(3, 1024)
        try:
            sample(d)
        finally:
            os._exit(0)
    with open(os.path.join(d, "sampler.pid"), "w") as f:
        f.write("%d\n" % pid)


def stop(d):
    try:
        libc_acct(None)
    except OSError:
        pass
    busy, total = cpu_ticks()
    with open(os.path.join(d, "meta"), "a") as f:
        f.write("%d %d %d\n" % (busy, total, time.time()))
    snapshot(os.path.join(d, "end.tsv"))
    try:
        with open(os.path.join(d, "sampler.pid")) as f:
            os.kill(int(f.read()), signal.SIGTERM)
    except (OSError, ValueError):
        pass


def comp_t(v):
    return (v & 0x1FFF) << (3 * ((v >> 13) & 7))


def read_acct(path):
    """[(pid, ppid, btime epoch s, cpu s, comm)] of acct v3 records."""
    recs = []
    with open(path, "rb") as f:
        data = f.read()
    for off in range(0, len(data) - 63, 64):
        (flag, ver, tty, exitcode, uid, gid, pid, ppid, btime, etime,
         ut, st, mem, io, rw, minflt, majflt, swaps, comm) = struct.unpack_from("<BBHIIIIII f8H16s", data, off)
        if ver & 0x7F != 3:
            continue
        recs.append((pid, ppid, btime, (comp_t(ut) + comp_t(st)) / AHZ,
                     comm.split(b"\0")[0].decode("utf-8", "replace")))
    return recs


def read_tsv(path):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 6:
                continue
            rows.append((int(p[0]), float(p[1]), int(p[2]), p[3], float(p[4]), p[5]))
    return rows


TOOLS = {"compile", "asm", "link", "cgo", "buildid", "pack", "cover", "vet"}
CC = {"gcc", "cc1", "as", "collect2", "ld", "cc", "x86_64-linux-gnu-gcc", "cc1plus"}
STACK = ("python3", "uwsgi", "mariadbd", "mysqld", "beam.smp", "erl_child_setup", "epmd",
         "inet_gethost", "rabbitmq", "octavia", "nova-", "neutron", "glance", "keystone",
         "placement", "privsep", "haproxy")
CONTROL = {"etcd", "kube-apiserver", "kubelet", "kube-scheduler", "kube-controller", "kube-controller-m",
           "containerd", "containerd-shim", "containerd-shim-runc-v2", "runc", "kwok", "gobgpd", "gobgp",
           "speaker", "controller", "kubectl", "helm", "crane", "umoci", "pause", "aws-cloud-contr"}
SHELL = {"bash", "sh", "make", "awk", "gawk", "mawk", "grep", "sed", "tee", "cat", "sort", "head", "tail",
         "cut", "tr", "date", "sleep", "flock", "mkdir", "rm", "mv", "cp", "env", "nice", "setsid", "find",
         "xargs", "git", "ls", "wc", "uniq", "dirname", "basename", "readlink", "touch", "tar", "gzip",
         "sha256sum", "chmod", "ln", "printf", "timeout", "ip", "curl", "openssl", "kill", "ps", "dd",
         "mktemp", "realpath", "id", "stat", "jq", "diff", "cmp", "test", "true", "false", "seq", "expr",
         "xz", "zstd", "od", "hostname", "uname", "getconf", "dpkg-query", "nproc", "python3.11"}


def go_mode(cmd):
    """What a go command (or compile) line builds: race, fuzz, vet or plain."""
    w = cmd.split()
    if "-d=libfuzzer" in w or any(x.startswith("-fuzz") for x in w):
        return "fuzz-instrumented"
    if "-race" in w:
        return "race"
    if len(w) > 1 and w[1] == "vet":
        return "for vet"
    return "plain"


def report(d, root=None, top=12):
    meta = open(os.path.join(d, "meta")).read().split()
    btime_boot = int(meta[0])
    busy0, total0, t0 = int(meta[1]), int(meta[2]), int(meta[3])
    busy1, total1, t1 = (int(meta[4]), int(meta[5]), int(meta[6])) if len(meta) >= 7 else (None, None, time.time())

    # Every process seen: (pid, start epoch) -> info.
    info = {}
    bypid = {}
    for src in ("start.tsv", "procs.tsv", "end.tsv"):
        for pid, st, ppid, comm, cpu, cmd in read_tsv(os.path.join(d, src)):
            key = (pid, round(btime_boot + st))
            if key not in info:
                info[key] = {"pid": pid, "start": btime_boot + st, "ppid": ppid, "comm": comm, "cmd": cmd}
                bypid.setdefault(pid, []).append(info[key])
            else:
                # Seen again: it exec'd (a shell's last command); the later is what ran longest.
                info[key].update(comm=comm, cmd=cmd)
    startcpu = {}
    for pid, st, ppid, comm, cpu, cmd in read_tsv(os.path.join(d, "start.tsv")):
        startcpu[(pid, round(btime_boot + st))] = cpu

    def find(pid, when):
        """The seen process with this pid alive at epoch second `when`."""
        best = None
        for p in bypid.get(pid, ()):
            if p["start"] <= when + 1.5 and (best is None or p["start"] > best["start"]):
                best = p
        return best

    procs = []  # (comm, cpu in window, own info or None, parent info or None)
    for pid, ppid, bt, cpu, comm in read_acct(os.path.join(d, "acct")):
        me = find(pid, bt)
        if me and abs(me["start"] - bt) > 2:
            me = None
        if me:
            cpu -= startcpu.get((pid, round(me["start"])), 0.0)
        parent = find(ppid, bt)
        procs.append((comm, max(cpu, 0.0), me, parent, ppid))
    # Alive at the end: CPU since the start (or since they started).
    for pid, st, ppid, comm, cpu, cmd in read_tsv(os.path.join(d, "end.tsv")):
        key = (pid, round(btime_boot + st))
        cpu -= startcpu.get(key, 0.0)
        me = info.get(key)
        procs.append((comm, max(cpu, 0.0), me, find(ppid, btime_boot + st), ppid))

    def ancestors(p):
        seen = 0
        while p is not None and seen < 64:
            yield p
            q = find(p["ppid"], p["start"])
            if q is p:
                return
            p = q
            seen += 1

    def service(comm, me):
        """The stack's service a process belongs to: uwsgi's app, python's script."""
        w = (me["cmd"] if me else "").split()
        if "--wsgi-file" in w and w.index("--wsgi-file") + 1 < len(w):
            svc = os.path.basename(w[w.index("--wsgi-file") + 1])
            if "octavia-neutron.conf" in " ".join(w):
                svc += " (neutron's)"
            return svc + " (uwsgi)"
        for x in w[:3]:
            b = os.path.basename(x)
            if b.startswith(("nova-", "octavia-", "neutron-", "glance-", "keystone", "placement")):
                return b
        if "nova-compute" in " ".join(w):
            return "nova-compute"
        return comm

    def is_stack(comm, me):
        cmd = me["cmd"] if me else ""
        if "cpuacct.py" in cmd:
            return False
        if comm.startswith("python"):
            return "mccm-openstack" in cmd
        return "mccm-openstack" in cmd or any(comm.startswith(s) for s in STACK)

    def ours(me, parent, ppid):
        if root is None:
            return True
        for p in ([me] if me else []) + ([parent] if parent else []):
            for a in ancestors(p):
                if a["pid"] == root:
                    return True
        return False

    def gocmd(p):
        for a in ancestors(p):
            if a["comm"] == "go":
                return a
            # A shell seen only before it exec'd its last command, go.
            w = a["cmd"].split()
            if a["comm"] in ("bash", "sh") and "go" in w and any(x in w for x in ("test", "build", "vet", "install", "run")):
                return dict(a, cmd=" ".join(w[w.index("go"):]))
        return None

    kinds = {}
    tests = {}
    bygo = {}
    stack = {}
    total = 0.0
    for comm, cpu, me, parent, ppid in procs:
        if cpu <= 0:
            continue
        if me and "cpuacct.py" in me["cmd"]:
            kind = "this accounting's sampler"
        elif is_stack(comm, me):
            kind = "OpenStack stack (python, uwsgi, mariadb, rabbitmq)"
            stack[service(comm, me)] = stack.get(service(comm, me), 0.0) + cpu
        elif not ours(me, parent, ppid):
            continue
        elif comm in TOOLS or comm in CC:
            src = me["cmd"] if me and comm == "compile" else ""
            mode = go_mode(src) if src else None
            if mode in (None, "plain"):
                g = gocmd(me or parent)
                mode = go_mode(g["cmd"]) if g else "plain"
                if mode == "plain" and src:
                    mode = "plain"
            g = gocmd(me or parent)
            gk = " ".join(g["cmd"].split()[:12])[:110] if g else "(no go command seen)"
            bygo[gk] = bygo.get(gk, 0.0) + cpu
            if comm == "vet":
                kind = "go vet's analyses (the vet tool)"
            elif comm in CC:
                kind = "C compiler for cgo (%s)" % mode
            elif comm == "link":
                kind = "go link (%s)" % mode
            else:
                kind = "go compile/asm (%s)" % mode
        elif comm == "go":
            kind = "the go command itself"
        elif comm == "golangci-lint":
            kind = "golangci-lint"
        elif comm == "multicloud-ccm":
            kind = "the CCM binary (e2e, chaos)"
        elif comm in CONTROL or comm.startswith("kube") or comm.startswith("containerd"):
            kind = "control plane and node (etcd, kube-*, containerd, ...)"
        elif comm.endswith(".test") or ".te" in comm or (parent and parent["comm"] == "go" and comm not in SHELL):
            name = comm
            if me and me["cmd"]:
                name = os.path.basename(me["cmd"].split()[0])
            g = gocmd(me or parent)
            mode = go_mode(g["cmd"]) if g else ("fuzz-instrumented" if "fuzz-bin" in (me or {}).get("cmd", "") else "plain")
            if "fuzz-bin" in (me or {}).get("cmd", ""):
                mode = "fuzz-instrumented"
            kind = "test binaries (%s)" % ("race" if mode == "race" else "fuzz" if mode == "fuzz-instrumented" else "plain")
            tests[name + (" (race)" if mode == "race" else "")] = tests.get(name + (" (race)" if mode == "race" else ""), 0.0) + cpu
        elif comm in SHELL or comm.startswith("python"):
            kind = "shells, make, coreutils"
        else:
            kind = "other: " + comm
        kinds[kind] = kinds.get(kind, 0.0) + cpu
        total += cpu

    print("CPU by kind of process (hack/cpuacct.py: process accounting, %d s of wall time%s):"
          % (t1 - t0, ", descendants of pid %d and the OpenStack stack" % root if root else ""))
    small = [k for k, v in kinds.items() if k.startswith("other: ") and v < 0.005 * total]
    if small:
        kinds["other (%d kinds, each under 0.5%%)" % len(small)] = sum(kinds.pop(k) for k in small)
    for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print("  %8.0f s  %5.1f%%  %s" % (v, 100 * v / total if total else 0, k))
    print("  %8.0f s  100.0%%  counted" % total)
    if busy1 is not None:
        mach = (busy1 - busy0) / CLK
        cap = (total1 - total0) / CLK
        print("  %8.0f s of the machine's CPU busy (/proc/stat), of %.0f s (%.0f%% busy)"
              % (mach, cap, 100 * mach / cap if cap else 0))
    if stack:
        print("the OpenStack stack's CPU by service:")
        for k, v in sorted(stack.items(), key=lambda kv: -kv[1])[:top]:
            print("  %8.0f s  %s" % (v, k))
    if bygo:
        print("the go toolchain's CPU (compile, link, vet, cgo) by the go command that ran it:")
        for k, v in sorted(bygo.items(), key=lambda kv: -kv[1])[:top]:
            print("  %8.0f s  %s" % (v, k))
    if tests:
        print("test binaries using the most CPU:")
        for k, v in sorted(tests.items(), key=lambda kv: -kv[1])[:top]:
            print("  %8.0f s  %s" % (v, k))


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "start":
        start(d)
    elif cmd == "stop":
        stop(d)
    elif cmd == "report":
        root, top = None, 12
        a = sys.argv[3:]
        while a:
            if a[0] == "--root":
                root = int(a[1]); a = a[2:]
            elif a[0] == "--top":
                top = int(a[1]); a = a[2:]
            else:
                raise SystemExit("cpuacct: unknown argument " + a[0])
        report(d, root, top)
    elif cmd == "sample":
        sample(d)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
