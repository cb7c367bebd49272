"""The paper's tables on this project: which run fills which cell (``tables``), running the cells
(``reproduce``), their step costs at equal conditions (``cell_bench``) and the recurrent layers' share of a
step (``recurrent_share``), the report rebuilt from the committed records (``report``), and the word-vector
probe behind Table 1's vector search (``vector_probe``). ``scripts/`` holds their thin commands."""
