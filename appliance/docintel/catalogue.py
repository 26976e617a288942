"""The Document Intelligence models the appliance offers, each mapped onto what it
already reads: a document type, and for receipts and invoices the appliance's key
fields under the service's field names and types."""

from __future__ import annotations

from dataclasses import dataclass, field

from appliance.docintel import API_VERSION
from appliance.errors import UnknownModel

# when the prebuilt models of this API version were published; a model's details need one
CREATED = "2024-11-30T00:00:00Z"
# the appliance's field kinds as the service's field types (the rest are strings)
FIELD_TYPES = {"money": "currency", "date": "date", "number": "number"}


@dataclass(frozen=True)
class ServiceField:
    name: str  # the service's, e.g. "InvoiceTotal"
    source: str  # the appliance's field it is read from, e.g. "gross"
    kind: str  # the appliance field's kind

    @property
    def type(self) -> str:
        return FIELD_TYPES.get(self.kind, "string")


@dataclass(frozen=True)
class Model:
    model_id: str
    description: str
    doc_type: str  # the appliance's document type its documents are read as
    layout: bool = False  # paragraph roles, tables, sections, Markdown content
    fields: tuple[ServiceField, ...] = field(default_factory=tuple)

    @property
    def service_doc_type(self) -> str:
        """The ``docType`` of its ``documents[]``: "receipt", "invoice"."""
        return self.model_id.removeprefix("prebuilt-")

    def details(self) -> dict:
        """The model as ``GET /documentModels/{modelId}`` answers it."""
        body = {"modelId": self.model_id, "description": self.description,
                "createdDateTime": CREATED, "apiVersion": API_VERSION}
        if self.fields:
            body["docTypes"] = {self.service_doc_type: {
                "buildMode": "template",
                "fieldSchema": {f.name: {"type": f.type} for f in self.fields}}}
        return body


MODELS = {model.model_id: model for model in (
    Model("prebuilt-read", "Extract text from documents.", "generic"),
    Model("prebuilt-layout", "Extract text and layout information from documents.", "generic",
          layout=True),
    Model("prebuilt-receipt", "Extract key information from receipts.", "receipt", fields=(
        ServiceField("MerchantName", "company", "text"),
        ServiceField("MerchantAddress", "address", "text"),
        ServiceField("TransactionDate", "date", "date"),
        ServiceField("Total", "total", "money"),
    )),
    Model("prebuilt-invoice", "Extract key information from invoices.", "invoice", fields=(
        ServiceField("InvoiceId", "number", "regex"),
        ServiceField("InvoiceDate", "issue_date", "date"),
        ServiceField("DueDate", "due_date", "date"),
        ServiceField("VendorName", "seller", "text"),
        ServiceField("CustomerName", "buyer", "text"),
        ServiceField("VendorTaxId", "seller_vat_id", "vat_id"),
        ServiceField("SubTotal", "net", "money"),
        ServiceField("TotalTax", "tax", "money"),
        ServiceField("InvoiceTotal", "gross", "money"),
    )),
)}


def model(model_id: str) -> Model:
    try:
        return MODELS[model_id]
    except KeyError:
        raise UnknownModel(f"there is no model {model_id[:100]!r}; this appliance offers "
                           f"{', '.join(MODELS)}") from None
