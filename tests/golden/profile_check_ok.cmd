profile check h200.json
