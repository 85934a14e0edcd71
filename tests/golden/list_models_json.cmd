list models --json
