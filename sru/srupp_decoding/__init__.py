"""The pieces of SRU++ decoding (``sru.srupp_decode``): its cache (``cache``: ``SRUppCache`` and the key/value
buffers it appends to in place) and its one-position step as one C call (``one_call``)."""
