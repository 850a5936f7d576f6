"""Create Octavia's database schema on sqlite and seed its lookup tables.

`octavia-db-manage upgrade head` does not run on sqlite, so this builds the
schema from Octavia's SQLAlchemy models and seeds the lookup tables the way
Octavia's own functional tests do (octavia/tests/functional/db/base.py).
Usage: python3 octavia_schema.py <sqlite-file>
"""
import sys

from sqlalchemy import create_engine, text
from sqlalchemy.orm import sessionmaker

from octavia.common import constants
from octavia.db import base_models
from octavia.db import models

LOOKUPS = [
    (constants.SUPPORTED_PROVISIONING_STATUSES, models.ProvisioningStatus),
    (constants.SUPPORTED_HEALTH_MONITOR_TYPES, models.HealthMonitorType),
    (constants.SUPPORTED_LB_ALGORITHMS, models.Algorithm),
    (constants.SUPPORTED_PROTOCOLS, models.Protocol),
    (constants.SUPPORTED_OPERATING_STATUSES, models.OperatingStatus),
    (constants.SUPPORTED_SP_TYPES, models.SessionPersistenceType),
    (constants.SUPPORTED_AMPHORA_ROLES, models.AmphoraRoles),
    (constants.SUPPORTED_LB_TOPOLOGIES, models.LBTopology),
    (constants.SUPPORTED_VRRP_AUTH, models.VRRPAuthMethod),
    (constants.SUPPORTED_L7RULE_TYPES, models.L7RuleType),
    (constants.SUPPORTED_L7RULE_COMPARE_TYPES, models.L7RuleCompareType),
    (constants.SUPPORTED_L7POLICY_ACTIONS, models.L7PolicyAction),
    (constants.SUPPORTED_CLIENT_AUTH_MODES, models.ClientAuthenticationMode),
]


def main(path):
    engine = create_engine('sqlite:///' + path)
    with engine.connect() as conn:
        conn.execute(text('PRAGMA journal_mode=WAL'))
    base_models.BASE.metadata.create_all(engine)
    session = sessionmaker(bind=engine)()
    for names, model in LOOKUPS:
        for name in names:
            session.add(model(name=name))
    session.flush()
    session.add(models.FlavorProfile(
        id=constants.NIL_UUID, name='DELETED-PLACEHOLDER',
        provider_name=constants.DELETED, flavor_data='{}'))
    session.flush()
    session.add(models.Flavor(
        id=constants.NIL_UUID, flavor_profile_id=constants.NIL_UUID,
        name='DELETED-PLACEHOLDER', enabled=False,
        description='Placeholder for DELETED LBs with DELETED flavors'))
    session.flush()
    session.add(models.AvailabilityZoneProfile(
        id=constants.NIL_UUID, name='DELETED-PLACEHOLDER',
        provider_name=constants.DELETED, availability_zone_data='{}'))
    session.flush()
    session.add(models.AvailabilityZone(
        availability_zone_profile_id=constants.NIL_UUID,
        name=constants.NIL_UUID, enabled=False,
        description='Placeholder for DELETED LBs with DELETED '
                    'availability zones'))
    session.commit()


if __name__ == '__main__':
    main(sys.argv[1])
