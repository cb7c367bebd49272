"""What tasks share to build models and data: encoders (one registry table), batching, vocabulary,
tokenisers, word vectors and the offline corpora's paths. Imports ``tasks.engine`` and ``sru`` only."""
