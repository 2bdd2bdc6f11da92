"""KGV's data model, split by topic: the KG, the verification path, memory and the audit log, KG audits, evaluations."""

from verifier.models.claims import Claim, ClaimPart, ClaimReview
from verifier.models.evaluation import Evaluation, EvaluationItem
from verifier.models.kg import (
    EMBEDDING_DIMENSIONS,
    Entity,
    EntityType,
    KnowledgeGraph,
    Passage,
    Relation,
    Triple,
)
from verifier.models.kg_audit import AuditChunk, KGAudit, Onboarding, Suspect
from verifier.models.memory import AuditEvent, MemoryEntry, RunMemory
from verifier.models.structure import ConfidenceModel, FitTriple, FoldNetwork, MinedRule, StructuralModel
from verifier.models.verification import (
    Agreement,
    Review,
    Run,
    SavedView,
    Step,
    SupportItem,
    Verdict,
    VerificationTask,
    agreement,
    latest_decisions,
)
from verifier.models.webhooks import Webhook, WebhookDelivery

__all__ = [
    "EMBEDDING_DIMENSIONS",
    "Agreement",
    "agreement",
    "latest_decisions",
    "AuditEvent",
    "AuditChunk",
    "KGAudit",
    "Onboarding",
    "Suspect",
    "Claim",
    "ClaimPart",
    "ClaimReview",
    "ConfidenceModel",
    "FitTriple",
    "FoldNetwork",
    "MinedRule",
    "StructuralModel",
    "Entity",
    "Evaluation",
    "EvaluationItem",
    "EntityType",
    "KnowledgeGraph",
    "MemoryEntry",
    "Passage",
    "Relation",
    "Review",
    "Run",
    "RunMemory",
    "SavedView",
    "Step",
    "SupportItem",
    "Triple",
    "Verdict",
    "VerificationTask",
    "Webhook",
    "WebhookDelivery",
]
