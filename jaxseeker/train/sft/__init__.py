"""Supervised fine-tuning: the step, the loop behind `jaxseeker sft`, the copy warm-up and `jaxseeker bench sft`."""
