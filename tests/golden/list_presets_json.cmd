list presets --json
