profile check bad.json
