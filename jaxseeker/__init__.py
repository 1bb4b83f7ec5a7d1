"""jaxseeker: train deep-search agents in one JAX program.

Stages are subpackages (`model`, `parallel`, `losses`, `rewards`, `generation`, `agent`, `tools`, `world`,
`synthesis`, `data`, `train`, `planning`, `eval`, and above them `pipeline` (the offline run behind `make demo`) and
`serve` (the OpenAI-compatible server)); import the one you need, e.g. `from jaxseeker import model, losses`.
"""

__version__ = "0.1.0"
