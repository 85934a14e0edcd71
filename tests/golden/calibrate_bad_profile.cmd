calibrate --backend cuda --out x.json --profile no-such-machine
