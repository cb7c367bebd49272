"""What ``torch.jit.script`` compiles of the layers (docs/deploy.md#torchscript): each module's
``forward`` starts with ``if torch.jit.is_scripting(): return self._scripted_forward(...)``, and
these mixins hold those methods: ``cells`` (SRUCell, SRU and the recurrence), ``attention``
(SRUppAttention) and ``srupp`` (SRUppCell, SRUpp)."""
