profile diff a.json b.json
