calibrate --backend cuda --out h200.json
