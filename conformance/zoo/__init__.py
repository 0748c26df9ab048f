"""The zoo tier: real model code from `transformers` and `timm` under a backend (`python -m conformance.zoo`).

`models` lists the architectures (tiny configs, random init, no downloads); `check` runs one against
float64 eager (loss, every gradient, a short training run); `report` writes the table and the plot.
"""
