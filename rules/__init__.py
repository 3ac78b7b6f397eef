"""mpcheck's built-in rules: one module per rule, discovered by
:func:`mpcheck.ruleset.rule.all_rules`."""
