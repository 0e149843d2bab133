#!/usr/bin/env python3
"""check_workflow.py WORKFLOW RUBRIC - the GitHub Classroom workflow that `make classroom`
writes, checked as GitHub Actions reads it (python3-yaml, no network):

  - the workflow's shape: only the top-level keys, events, job and step keys that GitHub's
    workflow syntax defines; every step either `uses` an action or `run`s a command; step ids
    unique and of the allowed form; every `${{ steps.ID.outputs.result }}` names a step;
  - the actions: only those listed below, at the versions named (each exists: its
    repository's release tags), with only the inputs each action's action.yml declares, its
    required inputs given;
  - the grading: one command-grader step per rubric item with the item's points, the
    reporter listing exactly those steps, each with its <ID>_RESULTS variable.

Prints "valid N tests P points" or one line per problem; exit 0 only when valid."""
import re
import sys

try:
    import yaml
except ImportError:
    print("check_workflow.py: python3-yaml is needed (apt-get install python3-yaml, or scripts/install-deps.sh --tests)")
    sys.exit(2)

# action@version -> (declared inputs, required inputs)
ACTIONS = {
    "actions/checkout@v4": ({"repository", "ref", "token", "ssh-key", "ssh-known-hosts", "ssh-strict", "ssh-user",
                             "persist-credentials", "path", "clean", "filter", "sparse-checkout",
                             "sparse-checkout-cone-mode", "fetch-depth", "fetch-tags", "show-progress", "lfs",
                             "submodules", "set-safe-directory", "github-server-url"}, set()),
    "classroom-resources/autograding-command-grader@v1": ({"test-name", "setup-command", "command", "timeout",
                                                            "max-score"}, {"test-name", "command"}),
    "classroom-resources/autograding-grading-reporter@v1": ({"runners"}, {"runners"}),
}
TOP = {"name", "run-name", "on", "permissions", "env", "defaults", "concurrency", "jobs"}
EVENTS = {"push", "pull_request", "repository_dispatch", "workflow_dispatch", "schedule", "workflow_call"}
JOB = {"name", "needs", "permissions", "runs-on", "environment", "concurrency", "outputs", "env", "defaults", "if",
       "steps", "timeout-minutes", "strategy", "continue-on-error", "container", "services"}
STEP = {"id", "if", "name", "uses", "run", "working-directory", "shell", "with", "env", "continue-on-error",
        "timeout-minutes"}
PERMISSIONS = {"actions", "attestations", "checks", "contents", "deployments", "id-token", "issues", "discussions",
               "packages", "pages", "pull-requests", "repository-projects", "security-events", "statuses"}
STEP_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def rubric_items(path):
    items = {}
    for line in open(path):
        words = line.split("#", 1)[0].split()
        if len(words) >= 3 and words[0] in ("group", "perf"):
            items[words[1]] = float(words[2])
    return items


def main():
    if len(sys.argv) != 3:
        print("usage: check_workflow.py WORKFLOW RUBRIC")
        return 2
    problems = []
    bad = problems.append
    try:
        wf = yaml.safe_load(open(sys.argv[1]))
    except (OSError, yaml.YAMLError) as e:
        print(f"not YAML: {e}")
        return 1
    if not isinstance(wf, dict):
        print("not a mapping at the top")
        return 1
    for k in wf:
        if k not in TOP:
            bad(f"top-level key {k!r} is not workflow syntax" + (" (YAML read an unquoted on: as true)" if k is True else ""))
    on = wf.get("on")
    events = on if isinstance(on, list) else list(on) if isinstance(on, dict) else [on]
    for e in events:
        if e not in EVENTS:
            bad(f"event {e!r} is not one this workflow may use")
    for k, v in (wf.get("permissions") or {}).items():
        if k not in PERMISSIONS or v not in ("read", "write", "none"):
            bad(f"permission {k}: {v} is not valid")
    jobs = wf.get("jobs") or {}
    if len(jobs) != 1:
        bad(f"{len(jobs)} jobs, expected one")
    steps = []
    for jid, job in jobs.items():
        if not STEP_ID.match(str(jid)):
            bad(f"job id {jid!r} is not valid")
        for k in job:
            if k not in JOB:
                bad(f"job {jid}: key {k!r} is not workflow syntax")
        if "runs-on" not in job:
            bad(f"job {jid}: no runs-on")
        steps = job.get("steps") or []
    ids = {}
    for n, st in enumerate(steps):
        where = f"step {n + 1} ({st.get('name', '?')})"
        for k in st:
            if k not in STEP:
                bad(f"{where}: key {k!r} is not workflow syntax")
        if ("uses" in st) == ("run" in st):
            bad(f"{where}: needs exactly one of uses and run")
        if "id" in st:
            if not STEP_ID.match(str(st["id"])):
                bad(f"{where}: id {st['id']!r} is not valid")
            if st["id"] in ids:
                bad(f"{where}: id {st['id']!r} used twice")
            ids[st["id"]] = st
        if "uses" in st:
            action = st["uses"]
            if action not in ACTIONS:
                bad(f"{where}: action {action!r} is not one known to exist at that version")
                continue
            declared, required = ACTIONS[action]
            given = set((st.get("with") or {}).keys())
            for k in sorted(given - declared):
                bad(f"{where}: {action} has no input {k!r}")
            for k in sorted(required - given):
                bad(f"{where}: {action} needs input {k!r}")
    text = open(sys.argv[1]).read()
    for ref in re.findall(r"\$\{\{\s*steps\.([A-Za-z0-9_-]+)\.outputs\.result\s*\}\}", text):
        if ref not in ids:
            bad(f"${{{{ steps.{ref}.outputs.result }}}} names no step")

    runs = [str(s.get("run", "")) for s in steps]
    if not any(re.search(r"\bmake\b.*\blab-[0-9]+", r) for r in runs):
        bad("no step runs make lab-N")
    if not any("scripts/install-deps.sh" in r for r in runs):
        bad("no step installs the kit's packages with scripts/install-deps.sh")

    graders = [s for s in steps if s.get("uses") == "classroom-resources/autograding-command-grader@v1"]
    reporters = [s for s in steps if s.get("uses") == "classroom-resources/autograding-grading-reporter@v1"]
    items = rubric_items(sys.argv[2])
    got = {s["with"].get("test-name"): float(s["with"].get("max-score", 0)) for s in graders if "with" in s}
    if got != items:
        bad(f"graders {sorted(got.items())} do not match the rubric's items {sorted(items.items())}")
    if len(reporters) != 1:
        bad(f"{len(reporters)} reporter steps, expected one")
    else:
        rep = reporters[0]
        runners = [r for r in re.split(r"[\s,]+", str(rep["with"]["runners"])) if r]
        if sorted(runners) != sorted(s.get("id", "") for s in graders):
            bad("the reporter's runners are not exactly the grader steps' ids")
        env = rep.get("env") or {}
        for r in runners:
            want = f"${{{{steps.{r}.outputs.result}}}}"
            if str(env.get(f"{r.upper()}_RESULTS", "")).replace(" ", "") != want:
                bad(f"the reporter has no {r.upper()}_RESULTS: {want}")
        if steps and steps[-1] is not rep:
            bad("the reporter is not the last step")
    if problems:
        for p in problems:
            print(p)
        return 1
    print(f"valid {len(graders)} tests {sum(got.values()):.1f} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
