export te --out - --json
