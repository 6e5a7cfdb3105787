def test_server_answers(pg_conn):
    assert pg_conn.execute("select 1").fetchone() == (1,)
