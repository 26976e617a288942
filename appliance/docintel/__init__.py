"""The Azure Document Intelligence REST API v4.0 (api-version 2024-11-30) under
``/documentintelligence``, as the ``azure-ai-documentintelligence`` SDK 1.0.2 speaks it,
so paperless-ngx and other Document Intelligence clients read with the appliance.

An analysis is an ordinary document (source ``api``, tag ``docintel``): it is read by
the appliance's routing, shows in the workspace, goes to review when in doubt and
obeys retention; its result id is the document's id.

- ``routes``: the HTTP routes (``router``), mounted by ``appliance.api``;
- ``catalogue``: the models offered and how each maps onto the appliance's document
  types and key fields;
- ``result``: an analysis's state and its AnalyzeResult, from the store;
- ``languages``: the language of each line of a result's content (``features=languages``);
- ``errors``: the service's error body and the appliance's reason codes in its terms.
"""

PREFIX = "/documentintelligence"
API_VERSION = "2024-11-30"
