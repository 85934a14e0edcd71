// Placeholder translation unit; removed when the layer gets real sources.
