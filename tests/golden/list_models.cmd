list models
