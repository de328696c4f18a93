"""Korean text analysis for the keyword leg: morphological tokenisation and BM25 term weights."""
