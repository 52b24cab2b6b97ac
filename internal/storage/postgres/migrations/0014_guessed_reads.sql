-- A batch of memory writes may answer its writes' reads with what they
-- most likely answer (guess.go) and send, with its writes, statements that
-- call this function when a read answers otherwise: the error aborts the
-- transaction before its COMMIT, and the batch runs again reading. Its own
-- SQLSTATE tells it from every other error.
CREATE FUNCTION memstore_guessed_wrong() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'memstore: a memory write batch guessed a read wrong; the batch runs again reading'
        USING ERRCODE = 'MSG01';
END
$$;
