"""Create Neutron's database schema on sqlite.

`neutron-db-manage upgrade head` does not run on sqlite (its migrations
ALTER constraints), so this builds the schema from Neutron's SQLAlchemy
models, as Neutron's own unit tests do (neutron.db.migration.models.head).
Neutron seeds nothing else: the ML2 type drivers fill their allocation
tables at start.
Usage: python3 neutron_schema.py <sqlite-file>
"""
import sys

from sqlalchemy import create_engine, text

from neutron.db.migration.models import head


def main(path):
    engine = create_engine("sqlite:///" + path)
    with engine.connect() as conn:
        # neutron-server's API and RPC workers write concurrently: WAL lets
        # readers go on beside a writer.
        conn.execute(text("PRAGMA journal_mode=WAL"))
    head.get_metadata().create_all(engine)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: neutron_schema.py <sqlite-file>")
    main(sys.argv[1])
