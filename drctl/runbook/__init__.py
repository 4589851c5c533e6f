"""Runbooks as data: DR procedures in YAML, planned, run, journaled and resumed.

Modules: `model` (what a runbook is), `loader` (schema and validation), `yaml_lines` (YAML
with line numbers), `kinds/` (one module per step kind, registered in `kinds.STEP_KINDS`),
`templating` (Jinja2), `variables`, `values` (yes/no and conditions), `actions` (the registry
of in-process drctl actions), `checks` (tolerances), `options` and `executor` (the run loop),
`result`, `journal`, `junit` (JUnit XML; the Markdown and HTML reports are rendered by
`drctl.reports`).

Runbook YAML
============

    name: smoke                        # default: the file name
    description: Is the lab up?        # shown in reports
    inputs:                            # variables: `vars.<name>` in templates
      lab_dir: lab                     # a plain value is a default
      api_token:
        secret: true                   # masked in journal, output, JUnit and reports
        default: "${env:API_TOKEN}"    # secrets by reference: ${env:NAME}, ${file:/path}
        description: token for the API
      target:                          # no default: required (--var target=...)
        description: cluster to fail over to
    steps:                             # run in order
      - name: lab_status               # identifier; later steps write steps.lab_status
        description: what and why      # optional
        action: lab.status             # an action of the registry (`drctl runbook actions`)
        with: {dir: "{{ vars.lab_dir }}"}
        outputs:                       # named outputs, from `result` (the action's return)
          running: "{{ result.all_running }}"
        timeout: 30s                   # 500ms, 5s, 2m, 1h, 2d, 1w or a number of seconds
        retry: true                    # see "Retries"
        until: "{{ result.all_running }}"  # retry until it holds (action and shell steps)
        when: "{{ vars.target != 'none' }}"  # run only if true (otherwise: skipped)
        on_failure: abort              # abort | continue | rollback | {rollback: [names]}
        undo: restart_it               # rollback step(s) that undo this step
      - name: list_dir
        shell: ls -1 "{{ vars.lab_dir }}"   # /bin/sh -c, in its own process group
        env: {TOKEN: "{{ vars.api_token }}"}   # added to drctl's environment
        cwd: /tmp
        outputs: {files: "{{ result.stdout.splitlines() }}"}
      - name: processes_up
        check:                         # a value and exactly one tolerance
          value: "{{ steps.lab_status.outputs.running }}"
          equals: true                 # or range: [0, 10] / {min: 0} / one_of: [a, b] /
                                       #    regex: "^4\\." (re.search)
      - name: lag_is_zero              # a check that fetches its value on every attempt
        check:
          action: lab.status           # a read-only action (checks also run in plans)
          with: {dir: "{{ vars.lab_dir }}"}
          value: "{{ result.replication_behind }}"
          range: [0, 0]
        retry: {attempts: 30, initial: 1s, max: 5s}   # retry until the check holds
      - name: go_ahead
        approval: Fail over to {{ vars.target }}?
      - name: settle
        pause: 10s
      - name: failover
        action: failover
        process: child                 # in a child process of its own: a fault may kill it
      - name: faults                   # faults at seeded moments in later steps (kinds/fault.py)
        fault:
          count: 3
          seed: 7
          window: [failover, {step: failback, within: [1s, 60s]}]
          lab: "{{ vars.lab_dir }}"     # or commands: {name: {kill, term, stop, cont, heal}}
    rollback:                          # steps run only by on_failure: rollback
      - name: restart_it
        action: lab.heal
        with: {what: replication}

Templates (Jinja2) see `vars`, `config` (the configuration, secrets masked), `steps.<name>`
(`.outputs.<name>`, `.status`) of earlier steps, `run` (`id`, `dry_run`, `runbook`,
`started`) and, in `outputs`/`until` and in a probed check's `value`, `result`. A string that
is a single `{{ expression }}` keeps the expression's type. Extra filters: `from_json`,
`to_json`, `dirname`, `basename`. Shell results are `stdout` and `stderr` (trailing newlines
removed), `exit_code` and `json` (stdout parsed when it is JSON). Check outputs see `value`.
`outputs: [a, b]` is short for `a: "{{ result['a'] }}"`; `{value: ..., secret: true}` masks an
output everywhere (a resumed run sees it masked).

Retries: drctl's one RetryPolicy (exponential backoff). `retry: true` takes Debezium's
defaults (1 s, doubling, capped at 120 s, 16 attempts); `retry: 5` five attempts with that
backoff; a mapping sets `attempts`, `initial`, `multiplier`, `max`, `deadline`. A non-zero exit,
an action error, a check that does not hold, an `until` that is false or a shell timeout fail
an attempt. An action that times out is not retried: it may still be running in-process.

Faults: a `fault:` step plans `count` faults from its `seed` — SIGKILL, SIGSTOP for a few
seconds, SIGTERM — on the lab's brokers, Connect worker and Spark Connect server, on the
step running then (`process: child` steps), or through the team's shell commands, each at a
random moment into a step of its window; a killed server is started again, as systemd would.
Each landing and healing is journaled (`fault`, `fault-healed`); a resumed run lands only
the faults not landed yet (runbook/faults.py).

Failures: `abort` (default) stops and leaves later steps not run; `continue` goes on and the
run still fails; `rollback` stops and runs the `undo` steps of the steps attempted so far,
newest first (the failing one included); `{rollback: [a, b]}` runs those rollback steps.

Approval gates prompt on a terminal. Without one (no TTY, `CI` set, `--non-interactive`)
they pass only with `--yes` or `--var approve.<step>=yes`; otherwise the run stops there,
exit 5, saying how to approve. Plans never prompt.

Exit statuses: 0 succeeded (or planned), 1 a step failed, 2 the runbook or its variables are
not valid (file, line, step named), 3 a check did not hold, 5 an approval was missing or
declined, 130 interrupted (Ctrl-C, SIGTERM).
"""
