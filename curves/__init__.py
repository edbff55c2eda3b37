"""Real training-loss curves for MARA: the bank format and loader, a recorder for user jobs, and the generator.

Importing this package pulls in NumPy only; the generator and families (which need torch) load on demand.
"""

from curves.bank import BankError, BankWriter, CurveBank, CurveRecord, FamilySpec, load_bank
from curves.recorder import CurveRecorder

__all__ = ["BankError", "BankWriter", "CurveBank", "CurveRecord", "CurveRecorder", "FamilySpec", "load_bank"]
