list presets
