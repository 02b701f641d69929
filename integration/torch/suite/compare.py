"""Compares one run of torch's distributed suite (run.py's JSON) with the
tests Gloo passes (baseline/gloo-w<world>.txt) and prints one line:

  torch-suite standin w3: 110 passed, 0 failed, 0 skipped (0 by name), 3 artefacts; ... OK

(failed: failures and errors other than the artefacts, in or out of the
baseline; only those in the baseline fail the comparison.)

It exits 1 when a test Gloo passes, among those the run selected, fails,
errors, skips (as a plugin: unless the suite gates it on the backend's
name, which run.py --name-checks lists with the suite's reason) or did not
run (a run cut short), except the artefacts in artefacts.txt for that mode.

  compare.py RESULTS.json [RESULTS.json ...] [--baseline FILE] [-v]"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def read_names(path):
    """The test names in a file, one a line; # starts a comment."""
    with open(path) as f:
        return {line.split("#")[0].strip() for line in f} - {""}


def read_artefacts(path):
    """{(test, mode): reason} from artefacts.txt."""
    out = {}
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            test, modes, reason = line.rstrip("\n").split("\t", 2)
            for mode in modes.split(","):
                out[(test, mode)] = reason
    return out


def compare(run, baseline, artefacts):
    """The verdict on one run: a dict of counts and lists (problems is what
    fails it)."""
    mode, results = run["mode"], run["results"]
    selected = set(run["selected"])
    name_skips = run.get("name_check_skips", {})
    claimed = set(run.get("claimed", []))
    v = {"passed": [], "failed": [], "skipped": [], "by_name": [], "artefacts": [], "problems": [], "stale_artefacts": []}
    for test in sorted(selected):
        r = results.get(test)
        status = r["status"] if r else "missing"
        if status == "pass":
            v["passed"].append(test)
        elif status == "skip":
            v["skipped"].append(test)
        elif status in ("fail", "error"):
            v["failed"].append(test)
        art = artefacts.get((test, mode))
        is_art = art is not None
        if is_art and status in ("fail", "error"):
            v["artefacts"].append("%s (%s): %s" % (test, status, art))
            continue
        if is_art and status == "pass":
            v["stale_artefacts"].append(test)
        if test not in baseline or status == "pass":
            continue
        if status == "skip" and mode == "plugin" and test in name_skips and test not in claimed:
            v["by_name"].append("%s: %s" % (test, name_skips[test]))
            continue
        reason = (r or {}).get("reason", "").strip().splitlines()
        v["problems"].append("%s: %s, Gloo passes it%s" % (test, status, (" (" + reason[-1][:200] + ")") if reason else ""))
    return v


def summary(run, v, baseline_n):
    """The one-line summary."""
    return "torch-suite %s w%d: %d passed, %d failed, %d skipped (%d by name), %d artefacts; %d of Gloo's %d checked; %.0f s: %s" % (
        run["mode"],
        run["world"],
        len(v["passed"]),
        len(v["failed"]) - len(v["artefacts"]),
        len(v["skipped"]),
        len(v["by_name"]),
        len(v["artefacts"]),
        len(set(run["selected"]) & baseline_n[1]),
        len(baseline_n[1]),
        run.get("secs", 0),
        "FAIL (%d)" % len(v["problems"]) if v["problems"] else "OK",
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+")
    ap.add_argument("--baseline", help="default: baseline/gloo-w<world>.txt")
    ap.add_argument("--artefacts", default=os.path.join(HERE, "artefacts.txt"))
    ap.add_argument("-v", action="store_true", help="list the artefacts and the tests skipped by name")
    args = ap.parse_args(argv)
    artefacts = read_artefacts(args.artefacts)
    bad = False
    for path in args.results:
        with open(path) as f:
            run = json.load(f)
        bpath = args.baseline or os.path.join(HERE, "baseline", "gloo-w%d.txt" % run["world"])
        baseline = read_names(bpath)
        v = compare(run, baseline, artefacts)
        if not run.get("finished"):
            v["problems"].append("the run did not finish (cut short?)")
        for p in v["problems"]:
            print("  FAIL %s" % p)
        if args.v:
            for a in v["artefacts"]:
                print("  artefact %s" % a)
            for b in v["by_name"]:
                print("  skipped by name %s" % b)
        for s in v["stale_artefacts"]:
            print("  note: listed artefact %s passes" % s)
        print(summary(run, v, (bpath, baseline)))
        bad = bad or bool(v["problems"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
