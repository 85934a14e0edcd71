calibrate --backend cpu --out cpu.json
