-- Appended to every script: closes the check's block and the loop over the batch.
until true
end
return answers
