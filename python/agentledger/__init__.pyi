"""The types of what ``agentledger`` exports (``__init__.py`` loads each on first use)."""

from agentledger._version import __version__ as __version__
from agentledger.activity import ActivityRejected as ActivityRejected
from agentledger.activity import ActivityResult as ActivityResult
from agentledger.activity import Observation as Observation
from agentledger.errors import AgentLedgerError as AgentLedgerError
from agentledger.errors import InvalidInput as InvalidInput
from agentledger.errors import LedgerError as LedgerError
from agentledger.errors import NotFound as NotFound
from agentledger.errors import WrongThread as WrongThread
from agentledger.journal import Entry as Entry
from agentledger.journal import Run as Run
from agentledger.ledger import Ledger as Ledger
from agentledger.verify import Divergence as Divergence
from agentledger.verify import RunVerdict as RunVerdict
from agentledger.verify import VerifyReport as VerifyReport

__all__: list[str]
