"""Every caller's inputs, batched: ``queue`` decides which inputs form the next batch, ``runner``
runs formed batches through the models.

Modelled on text-embeddings-inference, whose queue forms batches by a token budget apart from the
backend that runs them. Two words keep the two concerns apart: a *priority* is interactive (a
query someone waits for) or bulk (passages being ingested), and orders the queue; a *lane* is one
of the runner's parallel workers (``KNOWLEDGE_INFERENCE_LANES``), each running batches of either
priority on a thread of its own.
"""
