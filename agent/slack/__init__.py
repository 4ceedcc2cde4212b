"""``helpbot answer`` and its Slack companions: trigger -> thread -> question -> agent -> post; relay; feedback."""
