plan --tp 16
