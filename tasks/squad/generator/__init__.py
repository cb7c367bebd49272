"""The offline SQuAD-format corpus with natural questions: ``offline_corpus.prepare_offline`` reads
the prose, ``natural_questions`` turns parsed sentences into questions (with ``named_class``, ``parse_spans``,
``question_words``, ``question_checks``), ``pronouns`` and ``digests`` rewrite paragraphs the way people
describe a subject, ``question_stats`` measures how much the questions copy their sentences."""
