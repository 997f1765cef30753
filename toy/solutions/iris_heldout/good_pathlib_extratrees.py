import os
from pathlib import Path

import pandas as pd
from sklearn.ensemble import ExtraTreesClassifier

data = Path(os.environ["DATA_DIR"])
train = pd.read_csv(data / "train.csv")
test = pd.read_csv(data / "test.csv")
cols = [c for c in test.columns if c != "id"]
clf = ExtraTreesClassifier(n_estimators=500, min_samples_leaf=3, random_state=1).fit(train[cols], train.species)
probs = clf.predict_proba(test[cols])
sub = pd.DataFrame({"id": test["id"]})
for i, name in enumerate(clf.classes_):
    sub[name] = probs[:, i]
sub.to_csv(os.environ["SUBMISSION_PATH"], index=False)
