-- Argo CD health of a Cilium policy (CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy).
-- Cilium's operator validates every policy and records the answer in a status condition of
-- type Valid. A policy it marks Valid=False is applied but enforces nothing of what it says,
-- and nothing else shows it: Degraded, with the operator's message. Valid=True is Healthy;
-- Unknown is Progressing. A Cilium that writes no conditions (an older release, or status
-- updates turned off) leaves nothing to judge: Healthy, and the message says so.
local hs = {}
if obj.status ~= nil and obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Valid" then
      if condition.status == "False" then
        hs.status = "Degraded"
        hs.message = condition.message or "Cilium marked the policy Valid=False"
        return hs
      elseif condition.status == "True" then
        hs.status = "Healthy"
        hs.message = "Cilium accepted the policy"
        return hs
      else
        hs.status = "Progressing"
        hs.message = condition.message or "Cilium has not validated the policy yet"
        return hs
      end
    end
  end
end
hs.status = "Healthy"
hs.message = "Cilium reports no validation of this policy"
return hs
