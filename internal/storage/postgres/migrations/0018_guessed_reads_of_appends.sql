-- Append batches guess their reads too (sessionguess.go) and call
-- memstore_guessed_wrong() where a guess was wrong: its message no longer
-- names memory writes alone. Its SQLSTATE, how the server tells it from
-- every other error, stays.
CREATE OR REPLACE FUNCTION memstore_guessed_wrong() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'memstore: a batch of writes guessed a read wrong; the batch runs again reading'
        USING ERRCODE = 'MSG01';
END
$$;
